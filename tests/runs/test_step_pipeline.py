"""A step's commit in flight while the next step runs (ADR 0010 decision 10, runs.step_pipeline):
every step still commits exactly once, nothing of the next step leaves the process before the
commit in flight is confirmed, and a commit that did not commit is committed the ordinary way."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from agents.schemas import ChatReply
from audit.models import AuditEvent
from audit.services import audit_head_guess, audit_head_remember, audit_record, stream_for
from audit.verify import verify_stream
from runs import services
from runs.executor import drive_inline, run_step
from runs.graph import GRAPHS, Graph, Node
from runs.models import AgentRun, RunStatus, Step
from runs.state import state_at
from runs.step_pipeline import PipelineRefused, StepPipeline
from tests.runs.test_durability import CommitCounter

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif("connection.vendor != 'postgresql'",
                                 reason="the one-statement commit, the only one sent without waiting, is PostgreSQL's")]


@pytest.fixture(autouse=True)
def _nothing_left_in_flight():
    """A failing test may leave a commit in flight: confirm it, so the teardown can use the connection."""
    yield
    from runs.step_pipeline import _ACTIVE

    pipeline = getattr(_ACTIVE, "pipeline", None)
    if pipeline is not None:
        pipeline.drain()


def _start(analyst, tenant, n, graph="test_append"):
    return services.run_start(actor=analyst, tenant=tenant, graph=graph, input={"n": n},
                              budget={"max_steps": n + 5}, enqueue=False)


def _step(run, pipeline, worker="w1"):
    return run_step(run_id=run.pk, worker_id=worker, enqueue=False, keep_lease=True, pipeline=pipeline)


def _step_events(run) -> list[int]:
    return [event.payload["sequence"] for event in
            AuditEvent.objects.filter(run_id=str(run.pk), action="runs.step.completed").order_by("stream", "sequence")]


def _steps(run) -> list[int]:
    return list(Step.objects.filter(run=run).order_by("sequence").values_list("sequence", flat=True))


def test_steady_steps_are_sent_without_waiting_and_each_commits_once(analyst, tenant, test_graphs, monkeypatch):
    run = _start(analyst, tenant, n=8)
    pipeline = StepPipeline()
    assert _step(run, pipeline).action == "executed" and _step(run, pipeline).action == "executed"
    counter = CommitCounter(monkeypatch)
    for expected in (3, 4, 5):
        with connection.execute_wrapper(counter), CaptureQueriesContext(connection) as queries:
            outcome = _step(run, pipeline)
        assert (outcome.action, outcome.sequence, outcome.status) == ("executed", expected, RunStatus.RUNNING)
        # Step N's one statement was sent; step N-1's (sent by the call before) was confirmed by it.
        assert pipeline.pending is not None and pipeline.pending.sequence == expected
        assert [q["sql"].split()[0] for q in queries] == ["WITH"], queries
    assert counter.commits == 3 and counter.transactions == 0
    assert pipeline.sent >= 3
    # Any statement first waits for the commit in flight: the step it sent is there.
    assert _steps(run) == [1, 2, 3, 4, 5] and pipeline.pending is None
    while (outcome := _step(run, pipeline)).status == RunStatus.RUNNING:
        pass
    assert pipeline.drain() is None
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and _steps(run) == list(range(1, 9))
    assert _step_events(run) == list(range(1, 9))
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None
    assert run.state_hash == state_at(run)[0].hash()
    assert len(state_at(run)[0].notes) == 8


def test_a_sent_commit_that_was_refused_is_committed_the_ordinary_way_and_the_next_step_starts_again(
        analyst, tenant, test_graphs):
    run = _start(analyst, tenant, n=6)
    pipeline = StepPipeline()
    _step(run, pipeline)
    _step(run, pipeline)
    assert pipeline.drain() is None
    stream = stream_for(tenant_id=tenant.pk)
    stale = audit_head_guess(stream)
    with transaction.atomic():  # another writer appends to the run's stream
        audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:test", action="tests.other.write")
    audit_head_remember(stream, stale)
    optimistic = _step(run, pipeline)  # step 3 is sent against the stale head: the server refuses it
    assert (optimistic.action, optimistic.sequence) == ("executed", 3) and pipeline.pending is not None
    settled = _step(run, pipeline)  # step 4 runs, confirms step 3 at its commit: refused
    assert (settled.action, settled.sequence, settled.status) == ("executed", 3, RunStatus.RUNNING)
    assert pipeline.pending is None
    assert _steps(run) == [1, 2, 3] and _step_events(run) == [1, 2, 3]  # step 4's work was discarded
    while _step(run, pipeline).status == RunStatus.RUNNING:
        pass
    assert pipeline.drain() is None
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and _steps(run) == [1, 2, 3, 4, 5, 6]
    assert _step_events(run) == [1, 2, 3, 4, 5, 6]
    assert verify_stream(stream) is None
    final = state_at(run)[0]
    assert run.state_hash == final.hash() and final.data["count"] == 6 and len(final.notes) == 6


def test_a_cancel_committed_before_the_send_keeps_that_steps_work_and_cancels_the_run(analyst, tenant, test_graphs):
    run = _start(analyst, tenant, n=6)
    pipeline = StepPipeline()
    _step(run, pipeline)
    _step(run, pipeline)
    assert pipeline.drain() is None
    services.run_cancel(actor=analyst, run=AgentRun.objects.get(pk=run.pk), reason="stop")
    assert _step(run, pipeline).sequence == 3  # sent; the server refuses it (a cancel is pending)
    settled = pipeline.drain()
    assert (settled.action, settled.status, settled.sequence) == ("executed", RunStatus.CANCELLED, 3)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.lease_owner is None
    assert _steps(run) == [1, 2, 3] and _step_events(run) == [1, 2, 3]
    assert AuditEvent.objects.filter(run_id=str(run.pk), action="runs.run.cancelled").count() == 1
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None


def test_a_query_made_while_a_refused_commit_is_in_flight_raises_before_it_runs(analyst, tenant, test_graphs):
    """Outside run_step (whose callers settle it), the refusal surfaces at the first statement,
    which does not run; settle() then commits the step once."""
    run = _start(analyst, tenant, n=6)
    pipeline = StepPipeline()
    _step(run, pipeline)
    _step(run, pipeline)
    assert pipeline.drain() is None
    # Another writer (a budget raised without the lease): the version this worker holds is stale.
    AgentRun.objects.filter(pk=run.pk).update(max_steps=50, version=F("version") + 1)
    _step(run, pipeline)
    with pytest.raises(PipelineRefused) as refused:
        Step.objects.filter(run=run).count()
    assert pipeline.pending is None and "_set_autocommit" not in connection.__dict__
    assert _steps(run) == [1, 2]
    outcome = refused.value.settle()
    # The row moved under the step (not a cancel): the ordinary commit refuses too and nothing is written.
    assert (outcome.action, outcome.sequence) == ("lease_lost", None)
    assert _steps(run) == [1, 2] and _step_events(run) == [1, 2]
    final = drive_inline(run_id=run.pk, worker_id="w1", timeout_seconds=30)
    assert final.status == RunStatus.COMPLETED and _steps(final) == [1, 2, 3, 4, 5, 6]
    assert _step_events(final) == [1, 2, 3, 4, 5, 6] and final.max_steps == 50
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None


def test_closing_the_connection_with_a_commit_in_flight_confirms_it_first(analyst, tenant, test_graphs):
    run = _start(analyst, tenant, n=6)
    pipeline = StepPipeline()
    for _ in range(3):
        _step(run, pipeline)
    assert pipeline.pending is not None and pipeline.pending.sequence == 3
    connection.close()
    assert pipeline.pending is None and "_close" not in connection.__dict__
    assert _steps(run) == [1, 2, 3] and _step_events(run) == [1, 2, 3]


def _append_then_ask(ctx):
    """Even steps append (committed without waiting); odd ones ask the model."""
    count = ctx.get("count", 0) + 1
    ctx.set("count", count)
    if count % 2:
        ctx.call_model(schema=ChatReply, agent="chat", extra_context={"question": f"step {count}?"})
    else:
        ctx.note(f"step {count}")
    return ctx.end("done") if count >= int(ctx.input.get("n", 3)) else ctx.goto("node")


MIXED = Graph(name="test_pipeline_mixed", version="1", start="node", requires_case=False,
              nodes=(Node("node", _append_then_ask),))


def test_a_model_call_waits_for_the_commit_in_flight(analyst, tenant, test_graphs, monkeypatch):
    """A model call leaves the process: the previous step's commit is confirmed before it, even
    when nothing touched the database in between (the model boundary is replaced here by one that
    does not query)."""
    from runs.step_pipeline import _ACTIVE

    monkeypatch.setitem(GRAPHS, "test_pipeline_mixed", "tests.runs.test_step_pipeline:MIXED")
    in_flight_at_call = []

    def call_model_for_node(*, ctx, schema, **kwargs):
        pipeline = getattr(_ACTIVE, "pipeline", None)  # set while a commit is in flight
        in_flight_at_call.append(None if pipeline is None else pipeline.pending.sequence)
        return schema(answer="ok"), {}

    monkeypatch.setattr("runs.executor.call_model_for_node", call_model_for_node)
    run = _start(analyst, tenant, n=9, graph="test_pipeline_mixed")
    pipeline = StepPipeline()
    while (outcome := _step(run, pipeline)).status == RunStatus.RUNNING:
        pass
    assert outcome.status == RunStatus.COMPLETED and pipeline.drain() is None
    assert pipeline.sent >= 3  # the even steps' commits were sent without waiting
    assert _steps(run) == list(range(1, 10))
    assert in_flight_at_call == [None] * 5
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None


def test_a_wait_interrupted_before_the_result_closes_the_connection_and_the_run_goes_on_exactly_once(
        analyst, tenant, test_graphs, monkeypatch):
    """The statement reached the server (which committed it) but the worker never read its result:
    settle() finds the row moved on (lease_lost), and the driver continues from the database."""
    import psycopg

    run = _start(analyst, tenant, n=6)
    pipeline = StepPipeline()
    for _ in range(3):
        _step(run, pipeline)
    assert pipeline.pending is not None and pipeline.pending.sequence == 3
    real_wait = psycopg.Connection.wait

    def interrupted(self, gen, *args, **kwargs):
        monkeypatch.setattr(psycopg.Connection, "wait", real_wait)  # once
        gen.close()
        raise TimeoutError("soft time limit")

    monkeypatch.setattr(psycopg.Connection, "wait", interrupted)
    with pytest.raises(PipelineRefused) as refused:
        pipeline.confirm()
    assert connection.connection is None  # closed: the unread result cannot block the next statement
    outcome = refused.value.settle()
    assert outcome.action == "lease_lost"  # step 3 was committed after all: nothing is written twice
    assert _steps(run) == [1, 2, 3] and _step_events(run) == [1, 2, 3]
    final = drive_inline(run_id=run.pk, worker_id="w1", timeout_seconds=30, poll_seconds=0)
    assert final.status == RunStatus.COMPLETED and _steps(final) == [1, 2, 3, 4, 5, 6]
    assert _step_events(final) == [1, 2, 3, 4, 5, 6]
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None


def test_with_commits_in_flight_switched_off_every_commit_is_waited_for(analyst, tenant, test_graphs, settings,
                                                                       monkeypatch):
    sent = []
    send = StepPipeline.send

    def record(self, pending):
        sent.append(pending.sequence)
        return send(self, pending)

    monkeypatch.setattr(StepPipeline, "send", record)
    settings.ARBITER_RUN_COMMIT_IN_FLIGHT = False
    run = _start(analyst, tenant, n=8)
    final = drive_inline(run_id=run.pk, worker_id="w1", timeout_seconds=30)
    assert final.status == RunStatus.COMPLETED and _steps(final) == list(range(1, 9)) and sent == []
    settings.ARBITER_RUN_COMMIT_IN_FLIGHT = True  # the default
    run = _start(analyst, tenant, n=8)
    final = drive_inline(run_id=run.pk, worker_id="w1", timeout_seconds=30)
    assert final.status == RunStatus.COMPLETED and _steps(final) == list(range(1, 9)) and len(sent) >= 5
    assert _step_events(final) == list(range(1, 9))


def test_a_statement_deallocated_under_the_worker_is_prepared_again_and_no_step_is_lost(analyst, tenant, test_graphs):
    """Something reset the session's prepared statements (DEALLOCATE ALL, a pooler's DISCARD ALL):
    the commit in flight fails, is committed the ordinary way, and the next send prepares again."""
    run = _start(analyst, tenant, n=8)
    pipeline = StepPipeline()
    for _ in range(3):
        _step(run, pipeline)
    assert pipeline.drain() is None
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    sent_before = pipeline.sent
    assert _step(run, pipeline).sequence == 4  # sent against a statement the server no longer has
    settled = _step(run, pipeline)  # step 5 meets the failure: step 4 is committed the ordinary way
    assert (settled.action, settled.sequence) == ("executed", 4)
    while _step(run, pipeline).status == RunStatus.RUNNING:
        pass
    assert pipeline.drain() is None
    assert pipeline.sent - sent_before >= 3  # sent without waiting again after preparing once more
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and _steps(run) == list(range(1, 9))
    assert _step_events(run) == list(range(1, 9))
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None


def test_statements_prepared_again_after_a_partial_reset_get_names_the_server_does_not_hold():
    """Only one of this connection's step statements was deallocated (DEALLOCATE <name>): the
    names are forgotten when its failure is seen, and preparing the statements again must not reuse
    a name the server still holds (that would fail every later send with 'already exists')."""
    from runs.step_sql import _statement_name

    connection.ensure_connection()
    db, raw = connection, connection.connection
    first = _statement_name(db, raw, "SELECT 1")
    second = _statement_name(db, raw, "SELECT 2")
    with connection.cursor() as cursor:
        cursor.execute(f"DEALLOCATE {first.decode()}")
    db.__dict__.pop("_step_send_statements")  # what SentStepCommit.result does on sqlstate 26000
    again = (_statement_name(db, raw, "SELECT 1"), _statement_name(db, raw, "SELECT 2"))
    assert second not in again and len(set(again)) == 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name = ANY(%s)", [[n.decode() for n in again]])
        assert sorted(row[0].encode() for row in cursor.fetchall()) == sorted(again)


def test_commits_waited_for_survive_a_reset_of_prepared_statements_psycopg_did_not_see(analyst, tenant, test_graphs,
                                                                                      settings):
    """With commits in flight switched off, a pooler's DISCARD ALL (sent outside psycopg, which
    still believes its statement prepared) must not fail the run: that step is committed the
    ordinary way, and the next ones prepare the statement again."""
    settings.ARBITER_RUN_COMMIT_IN_FLIGHT = False
    run = _start(analyst, tenant, n=8)
    for sequence in (1, 2, 3):
        assert _step(run, None).sequence == sequence
    connection.connection.pgconn.exec_(b"DEALLOCATE ALL")  # not through psycopg: its cache is stale
    outcomes = []
    while not outcomes or outcomes[-1].status == RunStatus.RUNNING:
        outcomes.append(_step(run, None))
    assert [(outcome.action, outcome.sequence) for outcome in outcomes] == [("executed", n) for n in range(4, 9)]
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.error == "" and _steps(run) == list(range(1, 9))
    assert _step_events(run) == list(range(1, 9))
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None
