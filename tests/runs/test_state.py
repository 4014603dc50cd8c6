"""Checkpointed state: deltas, snapshots, loading any checkpoint, schema upgrade, linear storage."""

from __future__ import annotations

import json

import pytest

from runs import services
from runs.models import AgentRun, Checkpoint, RunStatus
from runs.state import (
    CURRENT_SCHEMA_VERSION,
    RunState,
    SchemaUpgradeError,
    apply_delta,
    diff,
    state_hash,
    upgrade,
)
from runs.state_load import state_at
from tests.runs.conftest import drive

V1_STATE = {
    "schema_version": 1,
    "goal": "Analyse CASE-2026-000001",
    "plan": ["risk_assessor", "policy_checker"],
    "outputs": {"triage": {"product": "Credit card"}, "evidence_analyst": {"summary": "Charged twice."}},
    "notes": ["triage done", "evidence done"],
    "completed": ["triage", "evidence_analyst"],
}


def test_diff_stores_only_what_changed_and_apply_restores_it():
    old = RunState(goal="g", plan=["a", "b"], notes=["n1"], observations={"a": {"x": 1}}, data={"k": 1}).as_dict()
    new = RunState(goal="g", plan=["b"], notes=["n1", "n2"], observations={"a": {"x": 1}, "b": {"y": 2}},
                   data={"k": 2}, phase="executing").as_dict()
    delta = diff(old, new)
    assert delta == {"set": {"plan": ["b"], "phase": "executing"}, "append": {"notes": ["n2"]},
                     "merge": {"observations": {"b": {"y": 2}}, "data": {"k": 2}}}
    assert apply_delta(old, delta) == new
    removed = diff({"data": {"a": 1, "b": 2}}, {"data": {"a": 1}})
    assert removed == {"unset": {"data": ["b"]}}
    assert apply_delta({"data": {"a": 1, "b": 2}}, removed) == {"data": {"a": 1}}


def test_upgrade_from_schema_1_maps_every_field():
    state = upgrade(V1_STATE)
    assert state == {
        "schema_version": 2,
        "goal": "Analyse CASE-2026-000001",
        "plan": ["risk_assessor", "policy_checker"],
        "observations": {"triage": {"product": "Credit card"}, "evidence_analyst": {"summary": "Charged twice."}},
        "notes": ["triage done", "evidence done"],
        "completed_steps": [{"sequence": 1, "node": "triage", "outcome": "goto"},
                            {"sequence": 2, "node": "evidence_analyst", "outcome": "goto"}],
        "data": {},
        "phase": "executing",
    }
    RunState.model_validate(state)
    assert V1_STATE["schema_version"] == 1  # the stored dict is not modified


def test_a_state_newer_than_the_code_is_refused():
    with pytest.raises(SchemaUpgradeError, match="newer than this code"):
        upgrade({"schema_version": CURRENT_SCHEMA_VERSION + 1, "goal": "g"})


@pytest.mark.django_db
def test_a_run_checkpointed_under_schema_1_loads_upgraded_and_continues(analyst, tenant, test_graphs):
    """A chain written by the previous code (v1 snapshot + v1 delta) followed by a v2 delta."""
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 2}, enqueue=False)
    Checkpoint.objects.filter(run=run).delete()
    Checkpoint.objects.create(run=run, sequence=0, schema_version=1, snapshot=V1_STATE, delta={"set": V1_STATE},
                              state_hash=state_hash(V1_STATE))
    v1_delta = {"append": {"notes": ["risk done"], "completed": ["risk_assessor"]},
                "merge": {"outputs": {"risk_assessor": {"risk_level": "high"}}}, "set": {"plan": ["policy_checker"]}}
    Checkpoint.objects.create(run=run, sequence=1, schema_version=1, delta=v1_delta, state_hash="x")
    v2_delta = {"merge": {"data": {"count": 1}}, "append": {"notes": ["tick 1"]}}
    Checkpoint.objects.create(run=run, sequence=2, schema_version=2, delta=v2_delta, state_hash="y")

    state, sequence = state_at(run)
    assert sequence == 2 and state.schema_version == 2
    assert state.observations["risk_assessor"] == {"risk_level": "high"}
    assert [s.node for s in state.completed_steps] == ["triage", "evidence_analyst", "risk_assessor"]
    assert state.notes == ["triage done", "evidence done", "risk done", "tick 1"]
    assert state.plan == ["policy_checker"] and state.data == {"count": 1}
    assert state_at(run, 1)[0].data == {}

    # The executor continues the run from the upgraded state and writes schema-2 checkpoints.
    AgentRun.objects.filter(pk=run.pk).update(next_sequence=3)
    run = drive(run)
    assert run.status == RunStatus.COMPLETED
    latest = Checkpoint.objects.get(run=run, sequence=3)
    assert latest.schema_version == 2
    final, _ = state_at(run)
    assert final.data == {"count": 2} and final.observations["risk_assessor"] == {"risk_level": "high"}
    assert latest.state_hash == final.hash()


@pytest.mark.django_db
def test_storage_grows_linearly_and_any_checkpoint_loads_cheaply(analyst, tenant, test_graphs, settings,
                                                                 django_assert_max_num_queries):
    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 2000
    run = drive(services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 50},
                                   budget={"max_steps": 60}, enqueue=False), max_steps=60)
    assert run.status == RunStatus.COMPLETED and run.steps_used == 50
    rows = list(Checkpoint.objects.filter(run=run).order_by("sequence"))
    assert len(rows) == 51
    deltas = [len(json.dumps(row.delta)) for row in rows[1:]]
    # Each step's delta holds only what it added: bounded, not growing with the history.
    assert max(deltas) < 800 and max(deltas[-10:]) <= max(deltas[:10]) + 50
    # Only the initial checkpoint is a full snapshot; compactions come by the size of the deltas
    # since the last one (ADR 0010), each relative to the one before, never the whole state.
    assert [row.sequence for row in rows if row.snapshot is not None] == [0]
    compactions = [row for row in rows if row.compacted is not None]
    assert [row.sequence for row in compactions] == [12, 24, 36, 48]  # every ~2,000 bytes of deltas
    since = 0
    for row in compactions:
        assert row.compacted_since == since
        weighed = sum(len(json.dumps(r.delta, separators=(",", ":"))) for r in rows if since < r.sequence <= row.sequence)
        assert weighed >= 2000 and weighed - len(json.dumps(row.delta, separators=(",", ":"))) < 2000
        since = row.sequence
    total = sum(row.size_bytes for row in rows)
    final_state = len(json.dumps(state_at(run)[0].as_dict()))
    # Linear: deltas (≈ constant each) + compactions of them; a re-serialise-everything design would
    # store sum(1..50) states ≈ 25 × the final state.
    assert total < 3 * final_state
    for sequence in (0, 7, 23, 50):
        with django_assert_max_num_queries(1):
            state, loaded = state_at(run, sequence)
        assert loaded == sequence
        assert state.hash() == rows[sequence].state_hash
        assert len(state.notes) == sequence and state.data.get("count", 0) == sequence
