"""The one-statement step commit (ADR 0010) sends every value in one JSON parameter and casts it back
per column in SQL: what it stores must be exactly what the values are — awkward strings, numbers
and JSON included — and the audit chain it extends must verify."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent
from audit.services import stream_for
from audit.verify import verify_stream
from runs import services
from runs.executor import run_step
from runs.graph import GRAPHS, Graph, Node, NodeContext
from runs.models import AgentRun, Checkpoint, RunStatus, Step
from runs.selectors import run_completed_nodes
from runs.state_load import state_at

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ODD = 'quote " backslash \\ newline \n tab \t é ü 中文 😀 \u2028 \u2029 \x7f </script> \' %s $1 ::jsonb'
WORKER = 'w "odd" \\ é 😀 $1'


def odd(ctx: NodeContext):
    count = ctx.get("count", 0) + 1
    ctx.set("count", count)
    ctx.set(f"key {count} {ODD}", {"text": ODD, "numbers": [0, -1, 2**62, 1.5, -2.25e-7],
                                   "nested": {"empty": [], "none": None, "bool": True}})
    ctx.note(f"{count} {ODD}")
    return ctx.end("done") if count >= int(ctx.input.get("n", 3)) else ctx.goto("odd")


GRAPH = Graph(name="test_odd", version="1", start="odd", requires_case=False, nodes=(Node("odd", odd),))


def test_awkward_values_are_stored_exactly_and_the_chain_verifies(analyst, tenant, monkeypatch):
    monkeypatch.setitem(GRAPHS, "test_odd", "tests.runs.test_step_commit_json:GRAPH")
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_odd", input={"n": 6}, budget={"max_steps": 10},
                             enqueue=False)
    one_statement = 0
    while True:
        with CaptureQueriesContext(connection) as queries:
            outcome = run_step(run_id=run.pk, worker_id=WORKER, enqueue=False, keep_lease=True)
        statements = [q["sql"] for q in queries if q["sql"] not in ("BEGIN", "COMMIT")]
        one_statement += [sql.startswith("WITH locked AS") for sql in statements] == [True]
        if outcome.status != RunStatus.RUNNING:
            break
    assert one_statement >= 3  # the steady-state steps took the one-statement path
    run = AgentRun.objects.get(pk=run.pk)
    assert run.status == RunStatus.COMPLETED and run_completed_nodes(run=run) == ["odd"] * 6
    state = state_at(run)[0]
    assert state.notes == [f"{count} {ODD}" for count in range(1, 7)]
    assert state.data[f"key 6 {ODD}"]["numbers"] == [0, -1, 2**62, 1.5, -2.25e-7]
    assert state.hash() == run.state_hash == Checkpoint.objects.get(run=run, sequence=6).state_hash
    steps = list(Step.objects.filter(run=run).order_by("sequence"))
    assert [step.worker_id for step in steps] == [WORKER] * 6
    assert all(step.finished_at >= step.started_at and step.node == "odd" for step in steps)
    events = AuditEvent.objects.filter(run_id=str(run.pk), action="runs.step.completed").order_by("sequence")
    assert [event.payload["sequence"] for event in events] == [1, 2, 3, 4, 5, 6]
    assert all(event.actor_id and event.target_id == str(run.pk) for event in events)
    assert verify_stream(stream_for(tenant_id=tenant.pk)) is None


def test_a_column_whose_json_text_would_not_cast_back_exactly_is_refused_before_anything_is_sent():
    from django.db import models

    from runs.step_sql import _slot

    for field in (models.FloatField(), models.DecimalField(max_digits=5, decimal_places=2), models.DateField(),
                  models.UUIDField()):
        field.set_attributes_from_name("value")
        with pytest.raises(NotImplementedError):
            _slot(field, 0)
    for field in (models.IntegerField(), models.BooleanField(), models.DateTimeField(), models.CharField(max_length=3),
                  models.JSONField()):
        field.set_attributes_from_name("value")
        assert _slot(field, 7).startswith(("(", "NULLIF(")) and " 7" in _slot(field, 7)
