"""Cheap durability (ADR 0010): one durable commit and at most 8 statements per steady-state step,
state in O(change) with a cache that never serves a stale state, incremental hashes equal to
from-scratch ones, deltas that rebuild every checkpoint (forks too), linear storage."""

from __future__ import annotations

import json
import random
import re

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from audit import hooks
from audit.models import AuditEvent
from audit.services import audit_head_guess, audit_head_remember, audit_record, stream_for
from audit.verify import verify_stream
from cases.models import Case
from runs import services
from runs.executor import STATE_CACHE, run_step
from runs.graph import GRAPHS
from runs.models import AgentRun, Checkpoint, RunStatus, Step
from runs.selectors import run_completed_nodes
from runs.state import (
    CompletedStep,
    RunState,
    StateDigest,
    StateTracker,
    apply_delta,
    diff,
    state_hash,
)
from runs.state_load import state_at
from tests.runs.conftest import drive


class CommitCounter:
    """Counts durable commits as a connection wrapper sees them: every write statement outside a
    transaction (autocommit) is one, and so is every transaction that wrote when it commits."""

    def __init__(self, monkeypatch):
        self.commits = 0
        self.transactions = 0  # explicit commits (of an atomic block), whether they wrote or not
        self.statements: list[str] = []
        self._dirty = False
        wrapper = connection  # the DatabaseWrapper behind the proxy
        original_commit = wrapper.commit

        def commit():
            self.transactions += 1
            if self._dirty:
                self.commits += 1
                self._dirty = False
            return original_commit()

        monkeypatch.setattr(wrapper, "commit", commit)

    def __call__(self, execute, sql, params, many, context):
        self.statements.append(sql)
        first = sql.lstrip().split(None, 1)[0].upper()
        if first in ("INSERT", "UPDATE", "DELETE") or (first == "WITH" and re.search(r"\b(INSERT|UPDATE|DELETE)\b", sql)):
            if context["connection"].in_atomic_block:
                self._dirty = True
            else:
                self.commits += 1
        return execute(sql, params, many, context)


def _start(analyst, tenant, n, graph="test_append"):
    return services.run_start(actor=analyst, tenant=tenant, graph=graph, input={"n": n},
                              budget={"max_steps": n + 5}, enqueue=False)


def _step(run, worker="w1"):
    return run_step(run_id=run.pk, worker_id=worker, enqueue=False, keep_lease=True)


@pytest.mark.django_db(transaction=True)
def test_a_steady_state_step_is_at_most_8_statements_and_one_durable_commit(analyst, tenant, test_graphs,
                                                                           monkeypatch):
    run = _start(analyst, tenant, n=10)
    assert _step(run).action == "executed" and _step(run).action == "executed"  # admission, claim, cache
    counter = CommitCounter(monkeypatch)
    for expected in (3, 4, 5):
        with connection.execute_wrapper(counter), CaptureQueriesContext(connection) as queries:
            outcome = _step(run)
        assert (outcome.action, outcome.sequence) == ("executed", expected)
        statements = [q["sql"] for q in queries if q["sql"].split()[0].upper() not in ("BEGIN", "COMMIT")]
        # The bound is 8. What it is: the run row is not read (this worker's own commit left it,
        # and the commit re-checks it). PostgreSQL: ONE statement, its own transaction — the
        # run's conditional UPDATE, Step, Checkpoint, head compare-and-set and audit event
        # (runs.step_commit). SQLite: the UPDATE, Step, Checkpoint, head lock, event, head advance.
        assert len(statements) == (1 if connection.vendor == "postgresql" else 6) <= 8, statements
    assert counter.commits == 3, counter.statements  # one per step
    # PostgreSQL: the statement is its own transaction (no BEGIN, no COMMIT round trips). SQLite: one
    # transaction per step.
    assert counter.transactions == (0 if connection.vendor == "postgresql" else 3)
    run.refresh_from_db()
    assert (run.lease_owner, run.state_sequence) == ("w1", 5)  # the lease stays with the stepping worker
    assert run_completed_nodes(run=run) == ["append"] * 5
    assert run.state_hash == Checkpoint.objects.get(run=run, sequence=5).state_hash == state_at(run)[0].hash()


def _step_events(run) -> list[int]:
    return [event.payload["sequence"] for event in
            AuditEvent.objects.filter(run_id=str(run.pk), action="runs.step.completed").order_by("stream", "sequence")]


@pytest.mark.django_db(transaction=True)
def test_an_audit_head_moved_by_another_writer_refuses_the_one_statement_commit_and_the_step_commits_once(
        analyst, tenant, test_graphs):
    run = _start(analyst, tenant, n=6)
    _step(run)
    _step(run)
    stream = stream_for(tenant_id=tenant.pk)
    stale = audit_head_guess(stream)
    # Another process appends to the run's stream; this process's guess of the head is now stale.
    with transaction.atomic():
        audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:test", action="tests.other.write")
    audit_head_remember(stream, stale)
    with CaptureQueriesContext(connection) as queries:
        outcome = _step(run)
    assert (outcome.action, outcome.sequence) == ("executed", 3)
    if connection.vendor == "postgresql":  # refused (nothing written), then committed the ordinary way
        sqls = [q["sql"] for q in queries if q["sql"] != "BEGIN"]
        assert sqls[0].startswith("WITH locked AS"), sqls
        assert any(sql.endswith("FOR UPDATE") and "audit_auditstreamhead" in sql for sql in sqls[1:]), sqls
    assert list(Step.objects.filter(run=run).order_by("sequence").values_list("sequence", flat=True)) == [1, 2, 3]
    assert _step_events(run) == [1, 2, 3]
    assert verify_stream(stream) is None
    while _step(run).status == RunStatus.RUNNING:  # and the guess is right again: back to one statement
        pass
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and _step_events(run) == [1, 2, 3, 4, 5, 6]
    assert run_completed_nodes(run=run) == ["append"] * 6
    assert verify_stream(stream) is None


@pytest.mark.django_db(transaction=True)
def test_an_audit_listener_interested_in_step_events_gets_them_inside_the_steps_transaction(
        analyst, tenant, test_graphs, monkeypatch):
    seen = []

    def listener(event):
        seen.append((event.action, event.payload.get("sequence"), connection.in_atomic_block))

    monkeypatch.setattr(hooks, "_after_record", [*hooks._after_record])
    hooks.register_after_record(listener, interested_in=lambda action: action == "runs.step.completed")
    run = _start(analyst, tenant, n=4)
    for _ in range(3):
        _step(run)
    assert [item for item in seen if item[0] == "runs.step.completed"] == [
        ("runs.step.completed", sequence, True) for sequence in (1, 2, 3)]


@pytest.mark.django_db(transaction=True)
def test_a_step_that_does_not_reread_the_run_still_sees_the_case_as_it_is_now(analyst, case, monkeypatch):
    monkeypatch.setitem(GRAPHS, "test_read_case", "tests.runs.graphs:READ_CASE")
    run = services.run_start(actor=analyst, case=case, graph="test_read_case", input={"n": 4},
                             budget={"max_steps": 9}, enqueue=False)
    _step(run)
    _step(run)  # from here on the run row is not re-read between this worker's steps
    Case.objects.filter(pk=case.pk).update(title="Renamed between steps")
    _step(run)
    Case.objects.filter(pk=case.pk).update(title="Renamed again")
    assert _step(run).status == RunStatus.COMPLETED
    assert state_at(run)[0].notes == [case.title, case.title, "Renamed between steps", "Renamed again"]


@pytest.mark.django_db(transaction=True)
def test_a_cancel_requested_between_steps_is_honoured_at_the_next_commit(analyst, tenant, test_graphs):
    """The steady-state step does not read the run row first; a cancellation requested after the
    previous commit is caught by this step's commit: its work is kept and the run is cancelled there."""
    run = _start(analyst, tenant, n=6)
    _step(run)
    _step(run)
    services.run_cancel(actor=analyst, run=AgentRun.objects.get(pk=run.pk), reason="stop")
    outcome = _step(run)
    assert (outcome.action, outcome.status, outcome.sequence) == ("executed", RunStatus.CANCELLED, 3)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.lease_owner is None
    assert run_completed_nodes(run=run) == ["append"] * 3
    assert Step.objects.filter(run=run).count() == 3 and _step_events(run) == [1, 2, 3]
    assert AuditEvent.objects.filter(run_id=str(run.pk), action="runs.run.cancelled").count() == 1
    assert _step(run).action == "finished" and Step.objects.filter(run=run).count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_run_row_written_by_someone_else_during_a_step_is_not_overwritten(analyst, tenant, test_graphs):
    """The commit requires the version this worker last saw: another write (here: a budget raised
    without the lease) makes it refuse with nothing written; the next attempt reads the row again."""
    run = _start(analyst, tenant, n=6)
    _step(run)
    _step(run)
    AgentRun.objects.filter(pk=run.pk).update(max_steps=50, version=F("version") + 1)
    outcome = _step(run)
    assert outcome.action == "lease_lost" and "changed" in outcome.detail
    assert Step.objects.filter(run=run).count() == 2 and _step_events(run) == [1, 2]
    run.refresh_from_db()
    assert (run.next_sequence, run.lease_owner, run.max_steps) == (3, "w1", 50)
    assert (_step(run).action, _step(run).sequence) == ("executed", 4)
    run.refresh_from_db()
    assert run.max_steps == 50 and _step_events(run) == [1, 2, 3, 4]
    assert run_completed_nodes(run=run) == ["append"] * 4


@pytest.mark.django_db(transaction=True)
def test_a_step_that_hands_off_still_commits_once_and_the_next_worker_claims(analyst, tenant, test_graphs,
                                                                            monkeypatch):
    run = _start(analyst, tenant, n=5)
    _step(run)
    counter = CommitCounter(monkeypatch)
    with connection.execute_wrapper(counter):
        assert run_step(run_id=run.pk, worker_id="w1", enqueue=False).action == "executed"  # releases
    assert counter.commits == 1
    run.refresh_from_db()
    assert run.lease_owner is None and run.lease_expires_at is not None  # the hand-off deadline
    assert run_step(run_id=run.pk, worker_id="w2", enqueue=False).action == "executed"
    assert Step.objects.get(run=run, sequence=3).worker_id == "w2"


@pytest.mark.django_db
def test_the_cache_is_not_used_when_another_worker_wrote_the_run(analyst, tenant, test_graphs):
    run = _start(analyst, tenant, n=6)
    _step(run, "w1")
    _step(run, "w1")
    w1_entry = STATE_CACHE.get(AgentRun.objects.get(pk=run.pk))
    assert w1_entry.sequence == 2
    # w2 takes over (w1's heartbeat timed out) and commits step 3. One process plays both workers,
    # so put w1's entry back afterwards, as w1's own process would still have it.
    AgentRun.objects.filter(pk=run.pk).update(lease_owner=None)
    assert run_step(run_id=run.pk, worker_id="w2", enqueue=False).action == "executed"
    STATE_CACHE.put(run.pk, w1_entry)
    while _step(run, "w1").status == RunStatus.RUNNING:
        pass
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    final, _ = state_at(run)
    assert final.notes == [f"{i:06d} " + "x" * 493 for i in range(1, 7)]
    assert [s.sequence for s in final.completed_steps] == [1, 2, 3, 4, 5, 6]
    assert final.hash() == run.state_hash


@pytest.mark.django_db
def test_a_stale_cache_entry_is_ignored(analyst, tenant, test_graphs):
    """The cached state is served only while the run row's (state_sequence, state_hash) match it."""
    run = _start(analyst, tenant, n=4)
    _step(run)
    entry = STATE_CACHE.get(AgentRun.objects.get(pk=run.pk))
    assert entry is not None and entry.sequence == 1
    entry.state.notes.append("a change nobody committed")  # a cache gone wrong
    AgentRun.objects.filter(pk=run.pk).update(state_hash="0" * 64)
    assert STATE_CACHE.get(AgentRun.objects.get(pk=run.pk)) is None
    assert _step(run).action == "executed"
    assert "a change nobody committed" not in state_at(run)[0].notes


def _rebuild_from_zero(run, sequence):
    rows = list(Checkpoint.objects.filter(run=run, sequence__lte=sequence).order_by("sequence"))
    state = rows[0].snapshot
    for row in rows[1:]:
        state = apply_delta(state, row.delta)
    return state, rows[-1]


@pytest.mark.django_db
def test_state_after_n_steps_is_checkpoint_0_plus_every_delta_for_random_n_and_random_forks(
        analyst, tenant, test_graphs, settings):
    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 3000  # compactions inside the chain too
    rng = random.Random(10)
    n = rng.randint(25, 40)
    parent = drive(_start(analyst, tenant, n=n), max_steps=n + 1)
    assert parent.status == RunStatus.COMPLETED
    assert Checkpoint.objects.filter(run=parent, compacted__isnull=False).count() >= 4
    for sequence in sorted(rng.sample(range(0, n + 1), 8)) + [n]:
        rebuilt, row = _rebuild_from_zero(parent, sequence)
        loaded, loaded_sequence = state_at(parent, sequence)
        assert loaded_sequence == sequence and loaded.as_dict() == rebuilt
        assert row.state_hash == state_hash(rebuilt) == loaded.hash()  # incremental hash == from scratch
    for from_sequence in rng.sample(range(1, n), 3):
        fork = services.run_fork(actor=analyst, run=parent, from_sequence=from_sequence, enqueue=False)
        fork = drive(fork, max_steps=n + 1)
        assert fork.status == RunStatus.COMPLETED
        rebuilt, row = _rebuild_from_zero(fork, n)
        assert state_at(fork)[0].as_dict() == rebuilt == state_at(parent)[0].as_dict()
        assert row.state_hash == state_hash(rebuilt)


def test_the_tracker_delta_equals_the_full_diff_and_the_digest_follows_it():
    state = RunState(goal="g", plan=["a", "b", "c"], notes=["n1"], observations={"a": {"x": 1}, "gone": 1},
                     data={"k": 1, "list": [1]})
    for mutate in (
        lambda s: s.notes.append("n2"),
        lambda s: setattr(s, "plan", s.plan[1:]),
        lambda s: s.observations.__setitem__("b", {"y": 2}),
        lambda s: s.observations.pop("gone"),
        lambda s: s.data.__setitem__("k", 2),
        lambda s: s.data.__setitem__("list", [*s.data["list"], 2]),
        # Not an append: the list is stored whole. (An append-only field cannot be changed in
        # place any other way — runs.state_lists.AppendLog has no insert, setitem or pop.)
        lambda s: setattr(s, "notes", ["n0", *s.notes]),
        lambda s: setattr(s, "phase", "executing"),
        lambda s: None,
    ):
        before = state.as_dict()
        digest = StateDigest(before)
        tracker = StateTracker(state)
        mutate(state)
        after = state.as_dict()
        delta = tracker.delta(state)
        assert apply_delta(before, delta) == after
        assert delta == diff(before, after) or "set" in delta  # an insertion is a set, not an append
        assert digest.apply(delta) == state_hash(after) == state.hash()


def test_the_state_hash_is_a_function_of_the_state():
    one = {"schema_version": 2, "goal": "g", "observations": {"a": 1, "b": [1, 2]}, "notes": ["x", "y"]}
    two = {"notes": ["x", "y"], "observations": {"b": [1, 2], "a": 1}, "goal": "g", "schema_version": 2}
    assert state_hash(one) == state_hash(two)
    assert state_hash(one) != state_hash({**one, "notes": ["y", "x"]})
    assert state_hash(one) != state_hash({**one, "observations": {"a": 1, "b": [2, 1]}})
    assert state_hash(one) != state_hash({**one, "notes": {"0": "x", "1": "y"}})


@pytest.mark.django_db
def test_storage_per_step_is_flat_and_bounded_for_a_1000_step_run(analyst, tenant, test_graphs, settings):
    """On the sizes the code computes (Checkpoint.size_bytes): bytes per step at 50, 200 and 1,000
    steps within ±20% of their mean and ≤ 2 KB; loading any checkpoint reads at most twice what
    loading the latest does, and that at most twice the state's own size."""
    n = 1000
    run = _start(analyst, tenant, n=n)
    for _ in range(n):
        outcome = _step(run)
        if outcome.status != RunStatus.RUNNING:
            break
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.steps_used == n
    rows = list(Checkpoint.objects.filter(run=run).order_by("sequence").values_list("sequence", "size_bytes",
                                                                                     "snapshot", "compacted"))
    items = dict(Checkpoint.objects.filter(run=run, compacted_items__isnull=False)
                 .values_list("sequence", "compacted_items"))
    per_step = {}
    for at in (50, 200, 1000):
        per_step[at] = sum(size for sequence, size, _snap, _comp in rows if sequence <= at) / at
    mean = sum(per_step.values()) / 3
    assert all(abs(value - mean) <= 0.2 * mean for value in per_step.values()), per_step
    assert max(per_step.values()) <= 2048, per_step

    def load_bytes(sequence, *, whole=True):
        """What reading the state after `sequence` reads: the snapshot, the compactions — with the
        append-only fields' items they stored when the state is read whole, without them when
        state_at leaves those in the database (runs.state_load) — and the deltas after them."""
        last = max(s for s, _size, snap, comp in rows if s <= sequence and (snap is not None or comp is not None))
        return sum(len(json.dumps(snap if snap is not None else comp)) + (len(json.dumps(items.get(s, {})))
                                                                          if whole else 0)
                   for s, _size, snap, comp in rows if s <= last and (snap is not None or comp is not None)) + \
            sum(len(json.dumps(delta)) for s, delta in deltas if last < s <= sequence)

    deltas = list(Checkpoint.objects.filter(run=run).values_list("sequence", "delta"))
    latest = load_bytes(n)
    assert max(load_bytes(sequence) for sequence in range(0, n + 1, 7)) <= 2 * latest
    assert [s for s, _size, snap, _comp in rows if snap is not None] == [0]  # never the whole state again
    state_size = len(json.dumps(state_at(run)[0].as_dict()))
    assert latest <= 2 * state_size
    # Without the stored items, a load reads the compactions' counts and digests and at most
    # ARBITER_CHECKPOINT_COMPACT_BYTES of deltas: a small part of the state after 1,000 steps.
    compact = settings.ARBITER_CHECKPOINT_COMPACT_BYTES
    lazy = [load_bytes(sequence, whole=False) for sequence in range(0, n + 1, 7)]
    assert max(lazy) <= load_bytes(n, whole=False) + compact + max(len(json.dumps(d)) for _s, d in deltas)
    assert load_bytes(n, whole=False) <= state_size / 4
    final = state_at(run)[0]
    assert len(final.notes) == n and not final.notes.loaded and final.hash() == run.state_hash
    assert [note[:6] for note in final.notes.as_list()] == [f"{i:06d}" for i in range(1, n + 1)]
    assert final.hash() == run.state_hash


@pytest.mark.django_db
def test_a_chain_in_the_previous_format_loads_continues_and_keeps_its_hashes_recognised(analyst, tenant, test_graphs):
    """Written by the code before ADR 0010: a full snapshot every k steps, the state hash = sha256 of
    the canonical JSON. It loads, the executor continues it (new-format checkpoints after it), and
    retention's chain check accepts both hash formats."""
    from runs.retention import plan_checkpoint_purge
    from runs.state import legacy_state_hash, state_hash_matches

    run = _start(analyst, tenant, n=6, graph="test_loop")
    Checkpoint.objects.filter(run=run).delete()
    state = RunState(goal="test_loop run", plan=["tick"])
    previous = None
    for sequence in range(0, 4):  # steps 1..3 as the old executor stored them, snapshot every 2
        if sequence:
            state.data["count"] = sequence
            state.notes.append(f"tick {sequence}")
            state.observations[f"tick-{sequence}"] = {"count": sequence}
            state.completed_steps.append(CompletedStep(sequence=sequence, node="tick", outcome="goto"))
            state.phase = "executing"
            state = RunState.model_validate(state.as_dict())
        current = state.as_dict()
        Checkpoint.objects.create(run=run, sequence=sequence, schema_version=2,
                                  delta=diff(previous or {}, current) if previous else {"set": current},
                                  snapshot=current if sequence % 2 == 0 else None,
                                  state_hash=legacy_state_hash(current))
        previous = current
    AgentRun.objects.filter(pk=run.pk).update(next_sequence=4, status=RunStatus.RUNNING, current_node="tick")
    loaded, sequence = state_at(run)
    assert sequence == 3 and loaded.as_dict() == previous
    while _step(run).status == RunStatus.RUNNING:
        pass
    final, _ = state_at(run)
    assert final.data["count"] == 6 and final.notes == [f"tick {i}" for i in range(1, 7)]
    rows = list(Checkpoint.objects.filter(run=run).order_by("sequence").values(
        "pk", "sequence", "schema_version", "delta", "snapshot", "state_hash", "created_at"))
    assert rows[-1]["state_hash"] == final.hash() != legacy_state_hash(final.as_dict())
    assert state_hash_matches(previous, rows[3]["state_hash"])
    from django.utils import timezone

    plan = plan_checkpoint_purge(rows, fork_points=set(), cutoff=timezone.now())  # no ChainMismatch
    assert plan.final_hash == final.hash()
