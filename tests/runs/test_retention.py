"""Retention (runs.retention): expired checkpoints, model-call contents and memory are
purged per tenant with one audit event each; final states, fork points, unfinished runs, audit and
case events stay; a dry run and a second purge change nothing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from audit.verify import verify_all
from cases.models import CaseEvent, Evidence
from conversations import services as conversation_services
from conversations.models import Message
from core.actors import Actor
from core.errors import NotFound
from core.hashing import canonical_json, sha256_hex
from runs import services
from runs.executor import run_step
from runs.models import (
    AgentRun,
    Artifact,
    Checkpoint,
    Finding,
    MemoryRecord,
    MemoryStatus,
    ModelCall,
    RunStatus,
    Step,
    ToolCall,
)
from runs.providers import ProviderError
from runs.retention import AUDIT_ACTION, CheckpointPurged, retention_purge
from runs.selectors import run_model_calls_at, run_state_at
from runs.state import state_hash
from runs.state_load import state_at
from runs.tasks import retention_purge_task
from tests.factories import make_case
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import FakeProvider, drive

pytestmark = pytest.mark.django_db

OLD = timedelta(days=400)  # older than every default retention period
AGENT = Actor.agent("chat", "1")


@pytest.fixture(autouse=True)
def _retention(settings):
    settings.ARBITER_RETENTION_CHECKPOINT_DAYS = 30
    settings.ARBITER_RETENTION_MODEL_CONTEXT_DAYS = 90
    settings.ARBITER_RETENTION_MEMORY_DAYS = 30
    settings.ARBITER_RETENTION_BATCH_SIZE = 2  # several pages even in small tests


def _analysed(analyst, case) -> AgentRun:
    """A case_analysis run driven to the end with the offline analyst (8 steps)."""
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run.status == RunStatus.COMPLETED and run.steps.count() == 8
    return run


def _age(run: AgentRun, by: timedelta = OLD, *, up_to: int | None = None) -> None:
    """Backdate a run's checkpoints (up to a sequence) and model calls."""
    when = timezone.now() - by
    checkpoints = Checkpoint.objects.filter(run=run)
    if up_to is not None:
        checkpoints = checkpoints.filter(sequence__lte=up_to)
    checkpoints.update(created_at=when)
    ModelCall.objects.filter(run=run).update(created_at=when)


def _states(run: AgentRun) -> dict[int, str]:
    """The state hash after every step that has a checkpoint."""
    return {seq: state_at(run, seq)[0].hash()
            for seq in Checkpoint.objects.filter(run=run).values_list("sequence", flat=True)}


def _sequences(run: AgentRun) -> list[int]:
    return list(Checkpoint.objects.filter(run=run).order_by("sequence").values_list("sequence", flat=True))


def _inspectable(run: AgentRun) -> dict:
    return {"steps": Step.objects.filter(run=run).count(), "findings": Finding.objects.filter(run=run).count(),
            "artifacts": Artifact.objects.filter(run=run).count(),
            "tool_calls": ToolCall.objects.filter(run=run).count(),
            "model_calls": ModelCall.objects.filter(run=run).count()}


def _execution_rows() -> dict:
    """Every retention-relevant row, for assert_nothing_changed."""
    return {
        "checkpoints": lambda: sorted(Checkpoint.objects.values_list("pk", "snapshot", "size_bytes")),
        "model_calls": lambda: sorted(ModelCall.objects.values_list("pk", "messages", "context", "raw_output",
                                                                    "validated_output", "error", "purged_at")),
        "memory": lambda: sorted(MemoryRecord.objects.values_list("pk", "status", "content")),
        "runs": lambda: sorted(AgentRun.objects.values_list("pk", "status", "checkpoints_purged_at")),
    }


def _events(tenant=None):
    events = AuditEvent.objects.filter(action=AUDIT_ACTION)
    return events.filter(tenant_id=tenant.pk) if tenant is not None else events


# --- checkpoints ------------------------------------------------------------------------------------

def test_old_intermediate_checkpoints_of_a_finished_run_are_purged_and_its_final_state_still_loads(
        analyst, case):
    run = _analysed(analyst, case)
    final_before = run_state_at(run=run)
    inspectable = _inspectable(run)
    assert _sequences(run) == list(range(9))
    _age(run)

    counts = retention_purge()

    assert (counts["checkpoints"], counts["runs"], counts["snapshots_written"]) == (8, 1, 1)
    assert _sequences(run) == [8]
    kept = Checkpoint.objects.get(run=run, sequence=8)
    assert kept.snapshot is not None and kept.delta  # the step's own delta stays, a snapshot is added
    assert run_state_at(run=run) == final_before
    assert run_state_at(run=run, sequence=8).hash() == final_before.hash() == kept.state_hash
    run.refresh_from_db()
    assert run.checkpoints_purged_at is not None and run.status == RunStatus.COMPLETED
    assert _inspectable(run) == inspectable  # steps, findings, artifacts, tool and model call rows stay


@pytest.mark.parametrize("snapshot_every", [3, 10])
def test_newer_checkpoints_stay_and_every_remaining_checkpoint_loads_as_before(
        analyst, case, settings, snapshot_every):
    settings.ARBITER_CHECKPOINT_SNAPSHOT_EVERY = snapshot_every
    run = _analysed(analyst, case)
    before = _states(run)
    _age(run, up_to=4)  # 0..4 expired, 5..8 recent

    counts = retention_purge()

    assert _sequences(run) == [5, 6, 7, 8] and counts["checkpoints"] == 5
    # The first kept delta after the gap got a snapshot (6 already is one when k=3).
    assert counts["snapshots_written"] == 1
    assert Checkpoint.objects.get(run=run, sequence=5).snapshot is not None
    assert {seq: run_state_at(run=run, sequence=seq).hash() for seq in (5, 6, 7, 8)} == \
        {seq: before[seq] for seq in (5, 6, 7, 8)}


def test_a_state_purged_from_the_inspector_says_so_instead_of_showing_another(analyst, case, client):
    run = _analysed(analyst, case)
    _age(run)
    retention_purge()

    with pytest.raises(CheckpointPurged, match="The checkpoint after step 3 of run .* was purged on .* retention"):
        run_state_at(run=run, sequence=3)
    assert isinstance(CheckpointPurged("x"), NotFound)
    client.force_login(analyst)
    purged_page = client.get(reverse("web:run_step", args=[run.pk, 3]))
    assert purged_page.status_code == 200  # the step stays inspectable; what was purged says so
    html = purged_page.content.decode()
    assert "The checkpoint after step 3" in html and "was purged on" in html
    assert "by the retention policy" in html  # the model call's purge note, in place of its messages
    assert "Raw output" not in html and "No valid output" not in html
    api = client.get(f"/api/v1/runs/{run.pk}/steps/3/model-calls/").json()
    calls = api["results"] if isinstance(api, dict) and "results" in api else api
    assert calls and all(call["purged_at"] and call["purged_sha256"] for call in calls)
    final_page = client.get(reverse("web:run_step", args=[run.pk, 8]))
    assert final_page.status_code == 200
    assert client.get(reverse("web:run_detail", args=[run.pk])).status_code == 200


def _failed_at_step_3(analyst, case, monkeypatch) -> tuple[AgentRun, FakeProvider]:
    provider = FakeProvider({"risk_assessor": ProviderError("bad request", retryable=False)})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run.status == RunStatus.FAILED and run.next_sequence == 4 and _sequences(run) == [0, 1, 2]
    return run, provider


def test_a_failed_step_still_shows_the_state_it_started_from_when_nothing_was_purged(analyst, case, monkeypatch):
    run, _provider = _failed_at_step_3(analyst, case, monkeypatch)
    assert run_state_at(run=run, sequence=3).hash() == state_at(run, 2)[0].hash()


def test_a_failed_run_is_purged_and_still_resumes_from_its_final_checkpoint(analyst, case, monkeypatch):
    run, provider = _failed_at_step_3(analyst, case, monkeypatch)
    last = state_at(run)[0].hash()
    _age(run)

    assert retention_purge()["checkpoints"] == 2
    assert _sequences(run) == [2] and state_at(run)[0].hash() == last
    assert run_state_at(run=run, sequence=3).hash() == last  # the failed step's page: the state it started from

    provider.answers.clear()  # the provider works again
    run = drive(services.run_resume(actor=analyst, run=run, enqueue=False))
    assert run.status == RunStatus.COMPLETED
    assert _sequences(run) == [2, *range(4, 10)]  # step 3 failed; 4..9 are the retried and later steps
    assert state_at(run, 4)[0].completed_steps[-1].sequence == 4


def test_running_waiting_and_queued_runs_are_never_touched(analyst, tenant, case, test_graphs):
    running = services.run_start(actor=analyst, case=case, enqueue=False)
    for _ in range(3):
        run_step(run_id=running.pk, worker_id="w", enqueue=False)
    running.refresh_from_db()
    waiting = drive(services.run_start(actor=analyst, tenant=tenant, graph="test_wait", enqueue=False))
    queued = services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 3}, enqueue=False)
    assert (running.status, waiting.status, queued.status) == (RunStatus.RUNNING, RunStatus.WAITING,
                                                              RunStatus.QUEUED)
    for run in (running, waiting, queued):
        _age(run)
    assert ModelCall.objects.filter(run=running).count() == 3

    with assert_nothing_changed(case, extra=_execution_rows()):
        counts = retention_purge()
    assert counts == dict.fromkeys(counts, 0)
    assert _sequences(running) == [0, 1, 2, 3]


def test_a_checkpoint_a_fork_was_made_from_is_kept_and_still_loads(analyst, case):
    parent = _analysed(analyst, case)
    parent_states = _states(parent)
    fork = drive(services.run_fork(actor=analyst, run=parent, from_sequence=3, enqueue=False))
    assert fork.status == RunStatus.COMPLETED
    fork_final = state_at(fork)[0].hash()
    _age(parent)
    _age(fork)

    counts = retention_purge()

    assert _sequences(parent) == [3, 8] and _sequences(fork) == [8]
    assert counts["checkpoints"] == 7 + 8 and counts["runs"] == 2
    fork.refresh_from_db()
    assert fork.forked_from_checkpoint == Checkpoint.objects.get(run=parent, sequence=3)
    assert state_at(parent, 3)[0].hash() == parent_states[3] == fork.forked_from_checkpoint.state_hash
    assert state_at(parent)[0].hash() == parent_states[8] and state_at(fork)[0].hash() == fork_final
    # A fork made after the purge, from the kept fork point, still reproduces the parent's state.
    second = services.run_fork(actor=analyst, run=parent, from_sequence=3, enqueue=False)
    assert state_at(second)[0].hash() == parent_states[3]
    with pytest.raises(CheckpointPurged, match="was purged on"):
        run_state_at(run=second, sequence=2)  # the fork copied what the purge had left of its parent


def test_a_run_whose_checkpoints_do_not_replay_is_kept_whole(analyst, case, caplog, settings):
    settings.ARBITER_RETENTION_MODEL_CONTEXT_DAYS = 0  # checkpoints only
    run = _analysed(analyst, case)
    Checkpoint.objects.filter(run=run, sequence=4).update(delta={"set": {"notes": ["tampered"]}})
    _age(run)

    with assert_nothing_changed(case, extra=_execution_rows()):
        counts = retention_purge()

    assert counts["runs_skipped"] == 1 and counts["checkpoints"] == 0
    assert "does not replay to its recorded state hash" in caplog.text


def test_a_chain_spanning_schema_versions_is_purged_and_loads_as_before(analyst, tenant, test_graphs):
    from tests.runs.test_state import V1_STATE

    run = services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 2}, enqueue=False)
    Checkpoint.objects.filter(run=run).delete()
    Checkpoint.objects.create(run=run, sequence=0, schema_version=1, snapshot=V1_STATE, delta={"set": V1_STATE},
                              state_hash=state_hash(V1_STATE))
    v1_delta = {"append": {"notes": ["risk done"], "completed": ["risk_assessor"]}, "set": {"plan": ["x"]}}
    Checkpoint.objects.create(run=run, sequence=1, schema_version=1, delta=v1_delta,
                              state_hash=state_hash({**V1_STATE, "notes": [*V1_STATE["notes"], "risk done"],
                                                     "completed": [*V1_STATE["completed"], "risk_assessor"],
                                                     "plan": ["x"]}))
    AgentRun.objects.filter(pk=run.pk).update(next_sequence=2)
    run = drive(run)
    assert run.status == RunStatus.COMPLETED and _sequences(run) == [0, 1, 2, 3]
    before = _states(run)
    _age(run, up_to=1)

    assert retention_purge()["checkpoints"] == 2
    assert _sequences(run) == [2, 3]
    assert {seq: state_at(run, seq)[0].hash() for seq in (2, 3)} == {2: before[2], 3: before[3]}


# --- model calls ---------------------------------------------------------------------------------------

def test_model_call_contents_are_blanked_and_the_row_keeps_its_facts_and_a_hash(analyst, case, tenant):
    run = _analysed(analyst, case)
    recent = _analysed(analyst, make_case(actor=analyst))
    _age(run, by=timedelta(days=91))
    calls = list(ModelCall.objects.filter(run=run).order_by("pk"))
    assert len(calls) == 6
    kept_fields = ("run_id", "step_id", "sequence", "attempt", "agent", "agent_version", "provider", "model",
                   "output_schema", "source_refs", "prompt_tokens", "completion_tokens", "latency_ms",
                   "provider_attempts")
    facts = {c.pk: {f: getattr(c, f) for f in kept_fields} for c in calls}
    hashes = {c.pk: sha256_hex(canonical_json({"messages": c.messages, "context": c.context,
                                               "raw_output": c.raw_output, "validated_output": c.validated_output,
                                               "error": c.error})) for c in calls}
    recent_rows = sorted(ModelCall.objects.filter(run=recent).values_list("pk", "messages", "raw_output"))

    counts = retention_purge()

    assert counts["model_calls"] == 6
    for call in ModelCall.objects.filter(run=run):
        assert (call.messages, call.context, call.raw_output, call.validated_output, call.error) == \
            ([], {}, "", None, "")
        assert {f: getattr(call, f) for f in kept_fields} == facts[call.pk]
        assert call.purged_sha256 == hashes[call.pk] and call.purged_at is not None
    assert sorted(ModelCall.objects.filter(run=recent).values_list("pk", "messages", "raw_output")) == recent_rows
    # "What did the agent see at step 3": the inspector's selector answers "purged on <date> (sha256 …)".
    (seen,) = run_model_calls_at(run=run, sequence=3)
    assert seen.is_purged
    assert seen.purge_note == (f"Purged on {timezone.now():%Y-%m-%d} by the retention policy "
                               f"(sha256 {hashes[seen.pk]}).")
    assert seen.source_refs["case_id"] == case.pk and seen.prompt_tokens > 0


# --- memory ------------------------------------------------------------------------------------------

def _memory(tenant, analyst, content: str) -> MemoryRecord:
    return services.memory_propose(actor=AGENT, tenant=tenant, subject=f"user:{analyst.pk}", content=content)


def test_memory_expired_rejected_or_forgotten_long_ago_is_deleted_and_never_in_a_context(analyst, tenant, case):
    now = timezone.now()
    expired_long_ago = services.memory_confirm(actor=analyst, memory=_memory(tenant, analyst, "Long expired."))
    MemoryRecord.objects.filter(pk=expired_long_ago.pk).update(expires_at=now - timedelta(days=31))
    expired_lately = services.memory_confirm(actor=analyst, memory=_memory(tenant, analyst, "Recently expired."))
    MemoryRecord.objects.filter(pk=expired_lately.pk).update(expires_at=now - timedelta(days=5))
    rejected_long_ago = services.memory_forget(actor=analyst, memory=_memory(tenant, analyst, "Rejected long ago."))
    MemoryRecord.objects.filter(pk=rejected_long_ago.pk).update(decided_at=now - timedelta(days=31))
    forgotten_long_ago = services.memory_forget(actor=analyst, memory=services.memory_confirm(
        actor=analyst, memory=_memory(tenant, analyst, "Forgotten long ago.")))
    MemoryRecord.objects.filter(pk=forgotten_long_ago.pk).update(decided_at=now - timedelta(days=40))
    forgotten_lately = services.memory_forget(actor=analyst, memory=_memory(tenant, analyst, "Rejected lately."))
    proposed = _memory(tenant, analyst, "Still proposed.")
    active = services.memory_confirm(actor=analyst, memory=_memory(tenant, analyst, "Prefers short summaries."))

    counts = retention_purge()

    assert counts["memory_records"] == 3
    assert set(MemoryRecord.objects.values_list("pk", flat=True)) == {
        expired_lately.pk, forgotten_lately.pk, proposed.pk, active.pk}
    assert MemoryRecord.objects.get(pk=proposed.pk).status == MemoryStatus.PROPOSED
    # A model context built afterwards holds the active memory only.
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    seen = {m for call in ModelCall.objects.filter(run=run) for m in call.source_refs.get("memory_ids", [])}
    assert seen == {active.pk}
    # The audit trail of the deleted records stays (proposed / confirmed / forgotten events).
    assert AuditEvent.objects.filter(target_type="memory", target_id=str(forgotten_long_ago.pk)).count() == 3


# --- settings, dry run, idempotency, audit -----------------------------------------------------------------

def _expired_everything(analyst, tenant, case) -> AgentRun:
    run = _analysed(analyst, case)
    _age(run)
    memory = services.memory_forget(actor=analyst, memory=_memory(tenant, analyst, "Prefers tables."))
    MemoryRecord.objects.filter(pk=memory.pk).update(decided_at=timezone.now() - OLD)
    return run


def test_zero_days_keeps_everything_forever(analyst, tenant, case, settings):
    _expired_everything(analyst, tenant, case)
    settings.ARBITER_RETENTION_CHECKPOINT_DAYS = 0
    settings.ARBITER_RETENTION_MODEL_CONTEXT_DAYS = 0
    settings.ARBITER_RETENTION_MEMORY_DAYS = 0

    with assert_nothing_changed(case, extra=_execution_rows()):
        counts = retention_purge()
    assert counts == dict.fromkeys(counts, 0)


def test_each_setting_governs_its_own_kind(analyst, tenant, case, settings):
    run = _expired_everything(analyst, tenant, case)
    settings.ARBITER_RETENTION_CHECKPOINT_DAYS = 0
    settings.ARBITER_RETENTION_MEMORY_DAYS = 0
    counts = retention_purge()
    assert (counts["checkpoints"], counts["model_calls"], counts["memory_records"]) == (0, 6, 0)
    assert len(_sequences(run)) == 9 and MemoryRecord.objects.count() == 1


def test_a_dry_run_changes_nothing_and_counts_what_a_purge_then_does(analyst, tenant, case):
    _expired_everything(analyst, tenant, case)

    with assert_nothing_changed(case, extra=_execution_rows()):
        predicted = retention_purge(dry_run=True)
    done = retention_purge()

    assert predicted == done
    assert (done["checkpoints"], done["snapshots_written"], done["model_calls"], done["memory_records"]) == \
        (8, 1, 6, 1)


def test_a_second_purge_purges_nothing(analyst, tenant, case):
    _expired_everything(analyst, tenant, case)
    retention_purge()

    with assert_nothing_changed(case, extra=_execution_rows()):
        again = retention_purge()
    assert again == dict.fromkeys(again, 0)


def test_one_audit_event_per_tenant_with_its_counts_and_no_audit_or_case_event_is_purged(
        analyst, tenant, case, outsider, other_tenant):
    _expired_everything(analyst, tenant, case)
    thread = conversation_services.thread_create(actor=analyst, tenant=tenant, title="Question", case=case)
    conversation_services.message_post(actor=analyst, thread=thread, content="What is the risk?")
    chat = drive(AgentRun.objects.get(thread=thread))
    assert chat.status == RunStatus.COMPLETED
    _age(chat)
    chat_checkpoints, chat_calls = len(_sequences(chat)), ModelCall.objects.filter(run=chat).count()
    assert chat_checkpoints >= 2 and chat_calls >= 1
    drive(services.run_start(actor=outsider, case=make_case(actor=outsider), enqueue=False))
    ModelCall.objects.filter(run__tenant=other_tenant).update(created_at=timezone.now() - OLD)
    untouched = {"audit": AuditEvent.objects.count(), "case_events": CaseEvent.objects.count(),
                 "evidence": Evidence.objects.count(), "messages": list(Message.objects.values_list("pk", "content"))}

    counts = retention_purge()

    assert counts["tenants"] == 2
    mine, theirs = _events(tenant).get(), _events(other_tenant).get()
    assert (mine.actor_type, mine.actor_id, mine.stream, mine.target_type) == ("system", "system:retention",
                                                                               f"tenant:{tenant.pk}", "tenant")
    assert mine.payload["counts"] == {"checkpoints": 8 + chat_checkpoints - 1, "snapshots_written": 2, "runs": 2,
                                      "model_calls": 6 + chat_calls, "memory_records": 1, "runs_skipped": 0}
    assert theirs.payload["counts"] == {"checkpoints": 0, "snapshots_written": 0, "runs": 0, "model_calls": 6,
                                        "memory_records": 0, "runs_skipped": 0}
    assert mine.payload["days"] == {"checkpoints": 30, "model_calls": 90, "memory": 30}
    assert counts["model_calls"] == mine.payload["counts"]["model_calls"] + 6
    assert {"audit": AuditEvent.objects.count(), "case_events": CaseEvent.objects.count(),
            "evidence": Evidence.objects.count(),
            "messages": list(Message.objects.values_list("pk", "content"))} == untouched | {
        "audit": untouched["audit"] + 2}
    assert verify_all(None)[1] == []


def test_a_purge_that_fails_for_a_tenant_rolls_that_tenant_back_and_goes_on(analyst, tenant, case, outsider,
                                                                             other_tenant, monkeypatch):
    _expired_everything(analyst, tenant, case)
    drive(services.run_start(actor=outsider, case=make_case(actor=outsider), enqueue=False))
    ModelCall.objects.filter(run__tenant=other_tenant).update(created_at=timezone.now() - OLD)
    from django.db import DatabaseError

    from runs import retention

    real = retention._purge_memory

    def broken(*, tenant_id, **kwargs):
        if tenant_id == tenant.pk:
            raise DatabaseError("disk full")
        return real(tenant_id=tenant_id, **kwargs)

    monkeypatch.setattr(retention, "_purge_memory", broken)
    counts = retention_purge()

    assert counts["tenants_failed"] == 1 and counts["model_calls"] == 6
    assert not _events(tenant).exists() and _events(other_tenant).count() == 1
    assert len(Checkpoint.objects.filter(run__tenant=tenant)) == 9  # rolled back whole
    assert not ModelCall.objects.filter(run__tenant=tenant, purged_at__isnull=False).exists()


# --- command and task ----------------------------------------------------------------------------------

def test_purge_expired_command_prints_counts_per_tenant(analyst, tenant, case, other_tenant, capsys):
    _expired_everything(analyst, tenant, case)

    call_command("purge_expired", "--dry-run")
    out = capsys.readouterr().out
    assert "acme: would purge 8 checkpoint(s) of 1 finished run(s) (1 kept checkpoint(s) given a full " \
           "snapshot), the content of 6 model call(s), 1 memory record(s)." in out
    assert "other: nothing expired." in out
    assert not _events().exists() and Checkpoint.objects.count() == 9

    call_command("purge_expired")
    out = capsys.readouterr().out
    assert "acme: purged 8 checkpoint(s)" in out and "Purged 8 checkpoint(s)" in out and "in 1 tenant(s)" in out
    assert _events(tenant).count() == 1

    call_command("purge_expired")
    assert "acme: nothing expired." in capsys.readouterr().out


def test_purge_expired_command_says_when_retention_is_off(settings, tenant, capsys):
    settings.ARBITER_RETENTION_CHECKPOINT_DAYS = 0
    settings.ARBITER_RETENTION_MODEL_CONTEXT_DAYS = 0
    settings.ARBITER_RETENTION_MEMORY_DAYS = 0
    call_command("purge_expired")
    assert "Retention is off" in capsys.readouterr().out


def test_the_beat_task_runs_the_same_purge_daily(analyst, tenant, case, settings):
    _expired_everything(analyst, tenant, case)
    entry = settings.CELERY_BEAT_SCHEDULE["purge-expired-state"]
    assert entry == {"task": "runs.tasks.retention_purge_task", "schedule": 86400.0}

    totals = retention_purge_task.apply().get()

    assert (totals["checkpoints"], totals["model_calls"], totals["memory_records"]) == (8, 6, 1)
    assert _events(tenant).count() == 1
    assert retention_purge_task.apply().get()["checkpoints"] == 0


# --- concurrency (PostgreSQL) ------------------------------------------------------------------------

@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_purges_at_once_purge_each_row_once(analyst, tenant, case):
    runs = [_analysed(analyst, make_case(actor=analyst)) for _ in range(3)]
    for run in runs:
        _age(run)
    barrier = threading.Barrier(2)
    results, errors = [None, None], []

    def work(index):
        try:
            barrier.wait(timeout=10)
            results[index] = retention_purge()
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not errors, errors
    assert sum(r["checkpoints"] for r in results) == 3 * 8
    assert sum(r["model_calls"] for r in results) == 3 * 6
    assert sum(r["runs"] for r in results) == 3
    assert all(_sequences(run) == [8] for run in runs)
    recorded = [e.payload["counts"] for e in _events(tenant)]
    assert sum(c["checkpoints"] for c in recorded) == 3 * 8 and sum(c["model_calls"] for c in recorded) == 3 * 6
    assert verify_all(None)[1] == []


def test_forking_from_a_purged_checkpoint_says_it_was_purged_and_changes_nothing(analyst, case):
    from core.errors import NotAllowed

    run = _analysed(analyst, case)
    _age(run)
    retention_purge()
    runs_before = AgentRun.objects.count()
    with assert_nothing_changed(case, extra={"runs": AgentRun.objects.count}), \
            pytest.raises(NotAllowed, match=r"step 3 of run R\d+ was purged on .* retention policy; fork from a kept"):
        services.run_fork(actor=analyst, run=run, from_sequence=3, enqueue=False)
    assert AgentRun.objects.count() == runs_before
