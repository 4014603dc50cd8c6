"""run_step: leases, one commit per step, retries, failures, budgets, cancellation, resume."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from core.actors import Actor
from core.errors import Forbidden, Invalid, NotAllowed, NotFound
from runs import services
from runs.executor import lease_reap_expired, run_step
from runs.models import AgentRun, Checkpoint, ModelCall, RunStatus, Step, StepStatus
from runs.providers import ModelOutputError, ProviderError
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import FakeProvider, drive

pytestmark = pytest.mark.django_db


def _runs_snapshot():
    return {
        "runs": sorted(AgentRun.objects.values_list("pk", "status", "version", "next_sequence", "lease_owner")),
        "steps": Step.objects.count(),
        "checkpoints": Checkpoint.objects.count(),
        "model_calls": ModelCall.objects.count(),
    }


@pytest.fixture
def loop_run(analyst, tenant, test_graphs):
    def make(n=3, **kwargs):
        return services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": n}, **kwargs)
    return make


def test_a_step_commits_step_checkpoint_audit_and_enqueues_the_next_on_commit(loop_run, enqueued,
                                                                             django_capture_on_commit_callbacks):
    run = loop_run(n=3, enqueue=False)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        outcome = run_step(run_id=run.pk, worker_id="w1")
    assert outcome.action == "executed" and outcome.sequence == 1
    assert len(callbacks) == 1 and enqueued == [(run.pk, 2, 0)]
    run.refresh_from_db()
    assert (run.status, run.next_sequence, run.current_node, run.lease_owner) == (RunStatus.RUNNING, 2, "tick", None)
    step = Step.objects.get(run=run)
    assert (step.sequence, step.node, step.status, step.outcome, step.worker_id) == (1, "tick", "completed", "goto",
                                                                                     "w1")
    checkpoint = Checkpoint.objects.get(run=run, sequence=1)
    assert checkpoint.step == step and checkpoint.delta["merge"]["data"] == {"count": 1}
    assert AuditEvent.objects.filter(run_id=str(run.pk), action="runs.step.completed").count() == 1


def test_a_duplicate_or_late_delivery_is_a_no_op(loop_run):
    run = loop_run(n=3, enqueue=False)
    assert run_step(run_id=run.pk, worker_id="w1", expected_sequence=1).action == "executed"
    before = _runs_snapshot()
    assert run_step(run_id=run.pk, worker_id="w2", expected_sequence=1).action == "stale"
    assert _runs_snapshot() == before
    assert Step.objects.filter(run=run).count() == 1


def test_a_worker_holding_the_lease_blocks_others_until_it_expires(loop_run):
    run = loop_run(n=3, enqueue=False)
    run_step(run_id=run.pk, worker_id="w1")  # admitted, step 1 done
    AgentRun.objects.filter(pk=run.pk).update(lease_owner="dead-worker",
                                              lease_expires_at=timezone.now() + timedelta(seconds=60))
    before = _runs_snapshot()
    assert run_step(run_id=run.pk, worker_id="w2").action == "busy"
    assert _runs_snapshot() == before
    AgentRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert run_step(run_id=run.pk, worker_id="w2").action == "executed"
    assert Step.objects.get(run=run, sequence=2).worker_id == "w2"


def test_a_worker_that_lost_its_lease_mid_step_commits_nothing(analyst, tenant, test_graphs, monkeypatch):
    def steal(request):
        AgentRun.objects.filter(pk=run.pk).update(lease_owner="thief")
        return {"answer": "late"}

    provider = FakeProvider({"chat": steal})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_chat", enqueue=False)
    outcome = run_step(run_id=run.pk, worker_id="w1")
    assert outcome.action == "lease_lost"
    assert not Step.objects.filter(run=run).exists()
    assert Checkpoint.objects.filter(run=run).count() == 1  # the initial one only
    assert not ModelCall.objects.exists()


def test_malformed_model_output_fails_the_step_and_the_run_with_the_error_stored(analyst, case, monkeypatch,
                                                                                  enqueued):
    bad = ModelOutputError("invalid RiskAssessment", raw='{"risk_level": "extreme"}',
                           errors="risk_level: Input should be 'low', 'medium', 'high' or 'critical'", attempts=2)
    provider = FakeProvider({"risk_assessor": bad})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run.status == RunStatus.FAILED and run.error_code == "model_output_invalid"
    assert "after 2 attempt(s)" in run.error and "risk_level" in run.error
    step = Step.objects.get(run=run, sequence=3)
    assert (step.node, step.status, step.outcome) == ("risk_assessor", StepStatus.FAILED, "failed")
    assert step.error == run.error
    call = ModelCall.objects.get(run=run, sequence=3)
    assert call.raw_output == '{"risk_level": "extreme"}' and "risk_level" in call.error
    assert call.validated_output is None and call.step == step
    assert not Checkpoint.objects.filter(run=run, sequence=3).exists()
    assert Step.objects.filter(run=run).count() == 3  # nothing after the failure
    assert AuditEvent.objects.filter(run_id=str(run.pk), action="runs.run.failed").count() == 1
    assert run_step(run_id=run.pk, worker_id="late").action == "finished"


def test_a_retryable_provider_error_retries_the_step(analyst, case, monkeypatch, enqueued, settings,
                                                     django_capture_on_commit_callbacks):
    settings.ARBITER_RUN_RETRY_BACKOFF_SECONDS = 7
    provider = FakeProvider({"triage": [ProviderError("HTTP 503", retryable=True), None]})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = services.run_start(actor=analyst, case=case, enqueue=False)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(run_id=run.pk, worker_id="w1")
    assert outcome.action == "retry" and outcome.retry_after == 7
    assert enqueued == [(run.pk, 1, 7)]
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.retry_counts == {"1": 1} and run.error_code == "retrying"
    assert not Step.objects.exists()
    assert ModelCall.objects.get(step__isnull=True).error.startswith("ProviderError")
    assert run_step(run_id=run.pk, worker_id="w2").action == "executed"
    step = Step.objects.get(run=run, sequence=1)
    assert step.attempt == 2 and step.status == "completed"
    run.refresh_from_db()
    assert run.retry_counts == {} and run.error == ""


def test_retries_are_bounded(analyst, case, monkeypatch, settings):
    settings.ARBITER_RUN_MAX_STEP_RETRIES = 2
    settings.ARBITER_RUN_RETRY_BACKOFF_SECONDS = 0
    provider = FakeProvider({"triage": ProviderError("HTTP 429", retryable=True)})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run.status == RunStatus.FAILED and "Gave up after 3 attempts" in run.error
    assert len(provider.requests) == 3
    assert Step.objects.get(run=run).attempt == 3


def test_a_crashing_node_fails_the_run_with_the_error(analyst, tenant, test_graphs):
    run = drive(services.run_start(actor=analyst, tenant=tenant, graph="test_crash", enqueue=False))
    assert run.status == RunStatus.FAILED and run.error_code == "node_error"
    assert "KeyError" in run.error and Step.objects.get(run=run).status == "failed"


@pytest.mark.parametrize(("budget", "reason"), [
    ({"max_steps": 3}, "Step budget exhausted: 3 of 3 steps used."),
    ({"max_tokens": 1}, "Token budget exhausted"),
])
def test_budget_exhaustion_fails_the_run_cleanly(analyst, case, fake_provider, budget, reason):
    run = drive(services.run_start(actor=analyst, case=case, budget=budget, enqueue=False))
    assert run.status == RunStatus.FAILED and run.error_code == "budget_exhausted"
    assert run.error.startswith(reason)
    assert run.lease_owner is None
    assert AuditEvent.objects.filter(run_id=str(run.pk), action="runs.run.failed").exists()
    if "max_steps" in budget:
        assert Step.objects.filter(run=run).count() == 3


def test_wall_time_budget(loop_run):
    run = loop_run(n=5, budget={"max_wall_seconds": 60}, enqueue=False)
    run_step(run_id=run.pk, worker_id="w1")
    AgentRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=61))
    outcome = run_step(run_id=run.pk, worker_id="w1")
    assert outcome.action == "failed" and "Wall-time budget exhausted" in outcome.detail
    assert Step.objects.filter(run=run).count() == 1


def test_cancel_a_queued_run_stops_it_at_once_and_queues_nothing(loop_run, analyst, enqueued,
                                                                   django_capture_on_commit_callbacks):
    run = loop_run(n=3, enqueue=False)
    with django_capture_on_commit_callbacks(execute=True):
        cancelled = services.run_cancel(actor=analyst, run=run, reason="wrong case")
    assert cancelled.status == RunStatus.CANCELLED and "wrong case" in cancelled.error
    assert enqueued == []
    assert run_step(run_id=run.pk, worker_id="w1").action == "finished"
    assert not Step.objects.exists()


def test_cancel_while_a_worker_holds_the_lease_takes_effect_at_the_step_boundary(
        analyst, tenant, test_graphs, enqueued, django_capture_on_commit_callbacks):
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 3}, enqueue=False)
    run_step(run_id=run.pk, worker_id="w1")  # tick 1
    # Mark cancel while the lease is held (a step in progress):
    AgentRun.objects.filter(pk=run.pk).update(lease_owner="w1", lease_expires_at=timezone.now() + timedelta(seconds=60))
    services.run_cancel(actor=analyst, run=run, reason="stop")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.cancel_requested_at is not None
    AgentRun.objects.filter(pk=run.pk).update(lease_owner=None)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(run_id=run.pk, worker_id="w1")
    assert outcome.action == "cancelled"
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and Step.objects.filter(run=run).count() == 1
    assert enqueued == []


def test_cancel_requested_while_a_step_runs_keeps_that_steps_work(analyst, tenant, test_graphs, monkeypatch,
                                                                  enqueued, django_capture_on_commit_callbacks):
    def cancel_during_call(request):
        services.run_cancel(actor=analyst, run=AgentRun.objects.get(pk=run.pk), reason="stop")
        return {"answer": "finished anyway"}

    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: FakeProvider({"chat": cancel_during_call}))
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_chat_loop", enqueue=False)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(run_id=run.pk, worker_id="w1")
    assert outcome.action == "executed"
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.error_code == "cancelled"
    step = Step.objects.get(run=run)
    assert step.status == "completed" and step.outcome == "goto"
    assert Checkpoint.objects.filter(run=run, sequence=1).exists()
    assert enqueued == []  # the next step is not enqueued
    assert AuditEvent.objects.filter(run_id=str(run.pk), action="runs.run.cancel_requested").exists()
    assert AuditEvent.objects.filter(run_id=str(run.pk), action="runs.run.cancelled").exists()


def test_cancel_refusals_change_nothing(loop_run, analyst, auditor, outsider, agent):
    run = drive(loop_run(n=1, enqueue=False))
    assert run.status == RunStatus.COMPLETED
    with assert_nothing_changed(extra={"runs": _runs_snapshot}), pytest.raises(NotAllowed, match="already completed"):
        services.run_cancel(actor=analyst, run=run)
    queued = loop_run(n=1, enqueue=False)
    for actor, error in ((auditor, Forbidden), (outsider, NotFound), (agent, Forbidden)):
        with assert_nothing_changed(extra={"runs": _runs_snapshot}), pytest.raises(error):
            services.run_cancel(actor=actor, run=queued)


def test_resume_a_waiting_run(analyst, tenant, test_graphs, enqueued, django_capture_on_commit_callbacks):
    run = drive(services.run_start(actor=analyst, tenant=tenant, graph="test_wait", enqueue=False))
    assert run.status == RunStatus.WAITING and run.wait_reason == "needs a person's answer"
    assert run_step(run_id=run.pk, worker_id="w").action == "finished"  # a delivery does not wake it
    with django_capture_on_commit_callbacks(execute=True):
        services.run_resume(actor=analyst, run=run)
    assert enqueued == [(run.pk, None, 0)]
    run = drive(run)
    assert run.status == RunStatus.COMPLETED
    assert list(run.steps.values_list("outcome", flat=True)) == ["wait", "end"]


def test_resume_a_failed_run_retries_the_node_as_a_new_step(analyst, case, monkeypatch):
    provider = FakeProvider({"triage": ProviderError("bad request", retryable=False)})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run.status == RunStatus.FAILED
    provider.answers.pop("triage")
    services.run_resume(actor=analyst, run=run, enqueue=False)
    run = drive(run)
    assert run.status == RunStatus.COMPLETED
    steps = list(run.steps.order_by("sequence").values_list("sequence", "node", "status"))
    assert steps[:2] == [(1, "triage", "failed"), (2, "triage", "completed")]


def test_resume_refusals_change_nothing(loop_run, analyst):
    run = loop_run(n=3, enqueue=False)
    run_step(run_id=run.pk, worker_id="w1")
    AgentRun.objects.filter(pk=run.pk).update(lease_owner="w9", lease_expires_at=timezone.now() + timedelta(seconds=60))
    with assert_nothing_changed(extra={"runs": _runs_snapshot}), pytest.raises(NotAllowed, match="w9"):
        services.run_resume(actor=analyst, run=run)
    done = drive(loop_run(n=1, enqueue=False))
    with assert_nothing_changed(extra={"runs": _runs_snapshot}), pytest.raises(NotAllowed, match="fork it"):
        services.run_resume(actor=analyst, run=done)


def test_run_start_refusals_change_nothing(analyst, auditor, outsider, agent, case, enqueued,
                                           django_capture_on_commit_callbacks):
    attempts = [
        ({"actor": agent, "case": case}, Forbidden),
        ({"actor": auditor, "case": case}, Forbidden),
        ({"actor": outsider, "case": case}, NotFound),
        ({"actor": analyst, "case": case, "graph": "nope"}, Invalid),
        ({"actor": analyst, "case": case, "provider": "nope"}, Invalid),
        ({"actor": analyst, "case": case, "budget": {"max_steps": 0}}, Invalid),
        ({"actor": analyst, "case": case, "budget": {"max_coffee": 3}}, Invalid),
        ({"actor": analyst, "tenant": analyst.tenant}, Invalid),  # case_analysis needs a case
    ]
    for kwargs, error in attempts:
        with django_capture_on_commit_callbacks(execute=True), \
                assert_nothing_changed(case, extra={"runs": _runs_snapshot}), pytest.raises(error):
            services.run_start(**kwargs)
    assert enqueued == []


def test_system_actor_may_start_runs(case, fake_provider):
    run = services.run_start(actor=Actor.system("cli"), case=case, enqueue=False)
    assert run.started_by == "system:cli" and run.started_by_user is None


def test_the_reaper_re_enqueues_runs_whose_worker_died_or_whose_message_was_lost(loop_run, enqueued):
    dead = loop_run(n=3, enqueue=False)
    run_step(run_id=dead.pk, worker_id="w1")
    AgentRun.objects.filter(pk=dead.pk).update(lease_owner="w1", lease_expires_at=timezone.now() - timedelta(seconds=1))
    lost = loop_run(n=3, enqueue=False)
    run_step(run_id=lost.pk, worker_id="w1")
    AgentRun.objects.filter(pk=lost.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    healthy = loop_run(n=3, enqueue=False)
    run_step(run_id=healthy.pk, worker_id="w1")
    waiting_in_queue = loop_run(n=3, enqueue=False)
    kicked = lease_reap_expired()
    assert set(kicked) == {dead.pk, lost.pk, waiting_in_queue.pk}
    assert (dead.pk, 2, 0) in enqueued and (lost.pk, 2, 0) in enqueued and (waiting_in_queue.pk, None, 0) in enqueued
    assert run_step(run_id=dead.pk, worker_id="w2", expected_sequence=2).action == "executed"


def test_a_write_refused_at_commit_fails_the_step_and_rolls_back_its_outputs(analyst, tenant, test_graphs):
    from runs.models import Finding

    run = drive(services.run_start(actor=analyst, tenant=tenant, graph="test_commit_refused", enqueue=False))
    assert run.status == RunStatus.FAILED and run.error_code == "commit_error"
    assert "The thread was closed meanwhile." in run.error
    assert Step.objects.get(run=run).status == "failed"
    assert not Finding.objects.exists() and not Checkpoint.objects.filter(run=run, sequence=1).exists()


def test_a_task_time_limit_inside_a_step_retries_it(analyst, tenant, test_graphs, monkeypatch, settings):
    from celery.exceptions import SoftTimeLimitExceeded

    settings.ARBITER_RUN_RETRY_BACKOFF_SECONDS = 0
    provider = FakeProvider({"chat": [SoftTimeLimitExceeded(), None]})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_chat", enqueue=False)
    assert run_step(run_id=run.pk, worker_id="w").action == "retry"
    assert drive(run).status == RunStatus.COMPLETED
    assert Step.objects.get(run=run).attempt == 2


def test_run_step_accepts_a_run_id_given_as_text(case, analyst):
    """Run ids travel as text on messages (reply_run_id) and audit rows; a step must still run."""
    from runs.executor import run_step
    from runs.services import run_start

    run = run_start(actor=analyst, case=case, enqueue=False)
    outcome = run_step(run_id=str(run.pk), worker_id="w-text", enqueue=False)
    assert outcome.action == "executed"
    assert outcome.run_id == run.pk


class _Deadlock(Exception):
    sqlstate = "40P01"


def test_a_deadlock_at_commit_runs_the_step_again_instead_of_failing_the_run(loop_run, monkeypatch, settings):
    from django.db import OperationalError

    from runs import executor

    settings.ARBITER_RUN_RETRY_BACKOFF_SECONDS = 0
    run = loop_run(n=2, enqueue=False)
    commit = executor._commit_step
    calls = []

    def deadlock_once(**kwargs):
        calls.append(kwargs["ctx"].sequence)
        if len(calls) == 1:
            raise OperationalError("deadlock detected") from _Deadlock()
        return commit(**kwargs)

    monkeypatch.setattr(executor, "_commit_step", deadlock_once)
    outcome = run_step(run_id=run.pk, worker_id="w1", enqueue=False)
    assert outcome.action == "retry" and outcome.sequence == 1
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.error_code == "retrying" and "lock conflict" in run.error
    assert not Step.objects.filter(run=run).exists()  # nothing of the step was written
    run = drive(run)
    assert run.status == RunStatus.COMPLETED and calls[:2] == [1, 1]
    assert list(Step.objects.filter(run=run).values_list("sequence", "attempt")) == [(1, 2), (2, 1)]


def test_a_lock_conflict_that_outlasts_the_retries_fails_the_run_with_the_reason(loop_run, monkeypatch, settings):
    from django.db import OperationalError

    from runs import executor

    settings.ARBITER_RUN_MAX_STEP_RETRIES = 1
    settings.ARBITER_RUN_RETRY_BACKOFF_SECONDS = 0

    def always(**kwargs):
        raise OperationalError("could not serialize access") from _Deadlock()

    monkeypatch.setattr(executor, "_commit_step", always)
    run = drive(loop_run(n=2, enqueue=False))
    assert run.status == RunStatus.FAILED and "lock conflict" in run.error and "Gave up after 2 attempts" in run.error
