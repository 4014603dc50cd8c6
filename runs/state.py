"""A run's checkpointed task state (DESIGN §4).

`RunState` is a pydantic model with a `schema_version`. Checkpoints store a *delta* (what one step
changed) and, every k steps, a full *snapshot*. Loading any checkpoint reads the nearest snapshot
at or before it plus the deltas after it, so:
  - storage grows linearly with steps (no step re-serialises the whole history: appended notes and
    completed steps are stored as appends, changed observations as per-key sets), and
  - loading the latest or any earlier checkpoint costs one query for at most k rows.

Old schema versions are upgraded on load (`upgrade`), one version at a time.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field

from core.hashing import canonical_json, sha256_hex

CURRENT_SCHEMA_VERSION = 2


class CompletedStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sequence: int
    node: str
    outcome: str


class RunState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[2] = 2
    goal: str
    plan: list[str] = Field(default_factory=list)  # nodes still to run; head = the current node
    observations: dict[str, Any] = Field(default_factory=dict)  # node -> validated output dict
    notes: list[str] = Field(default_factory=list)
    completed_steps: list[CompletedStep] = Field(default_factory=list)
    data: dict[str, Any] = Field(default_factory=dict)  # graph scratch (e.g. "replanned": true)
    phase: str = "planning"

    def as_dict(self) -> dict:
        return self.model_dump(mode="json")

    def hash(self) -> str:
        return state_hash(self.as_dict())


class SchemaUpgradeError(ValueError):
    pass


def _upgrade_1_to_2(state: dict) -> dict:
    """Version 1 (the first runs) kept `outputs` (node -> output), `completed` (node names, one per
    step, in order) and free-text `notes`, and had no scratch data or phase. Version 2 renames
    outputs -> observations, numbers the completed steps (step n ran completed[n-1]; v1 recorded
    only completed steps, so their outcome is "goto" except the last one of a finished run, which
    v1 could not tell apart — "goto" too) and adds `data` and `phase`."""
    completed = state.get("completed", [])
    phase = "done" if state.get("finished") else ("executing" if completed else "planning")
    return {
        "schema_version": 2,
        "goal": state["goal"],
        "plan": list(state.get("plan", [])),
        "observations": dict(state.get("outputs", {})),
        "notes": [str(n) for n in state.get("notes", [])],
        "completed_steps": [{"sequence": index, "node": node, "outcome": "goto"}
                            for index, node in enumerate(completed, start=1)],
        "data": {},
        "phase": phase,
    }


UPGRADES = {1: _upgrade_1_to_2}


def upgrade(state: dict, to_version: int = CURRENT_SCHEMA_VERSION) -> dict:
    """Bring a stored state dict to `to_version` (default: current), one version at a time."""
    state = copy.deepcopy(state)
    version = int(state.get("schema_version", 1))
    if version > CURRENT_SCHEMA_VERSION:
        raise SchemaUpgradeError(f"Checkpoint schema version {version} is newer than this code "
                                 f"({CURRENT_SCHEMA_VERSION}); deploy the newer code to load it.")
    while version < to_version:
        state = UPGRADES[version](state)
        version = int(state["schema_version"])
    return state


def load_state(state: dict) -> RunState:
    return RunState.model_validate(upgrade(state))


def state_hash(state: dict) -> str:
    return sha256_hex(canonical_json(state))


# --- deltas ---------------------------------------------------------------------------------
# A delta is {"set": {field: value}, "merge": {field: {key: value}}, "unset": {field: [keys]},
#             "append": {field: [items]}}.
# Lists that only grew are stored as appends, dicts as changed keys, anything else as a set.

def diff(old: dict, new: dict) -> dict:
    delta: dict[str, dict] = {}
    for key, value in new.items():
        before = old.get(key)
        if before == value:
            continue
        if isinstance(before, list) and isinstance(value, list) and value[: len(before)] == before:
            delta.setdefault("append", {})[key] = value[len(before):]
        elif isinstance(before, dict) and isinstance(value, dict):
            changed = {k: v for k, v in value.items() if before.get(k) != v or k not in before}
            removed = [k for k in before if k not in value]
            if changed:
                delta.setdefault("merge", {})[key] = changed
            if removed:
                delta.setdefault("unset", {})[key] = removed
        else:
            delta.setdefault("set", {})[key] = value
    return delta


def apply_delta(state: dict, delta: dict) -> dict:
    state = copy.deepcopy(state)
    for key, value in delta.get("set", {}).items():
        state[key] = copy.deepcopy(value)
    for key, changes in delta.get("merge", {}).items():
        state.setdefault(key, {}).update(copy.deepcopy(changes))
    for key, removed in delta.get("unset", {}).items():
        for item in removed:
            state.get(key, {}).pop(item, None)
    for key, items in delta.get("append", {}).items():
        state.setdefault(key, []).extend(copy.deepcopy(items))
    return state


def should_snapshot(sequence: int) -> bool:
    return sequence == 0 or sequence % settings.ARBITER_CHECKPOINT_SNAPSHOT_EVERY == 0


def checkpoint_fields(*, sequence: int, previous: dict | None, current: RunState) -> dict:
    """The columns of the checkpoint that follows step `sequence`: always the delta from the
    previous state, plus a full snapshot every k steps (and for the initial state)."""
    new = current.as_dict()
    delta = diff(previous or {}, new) if previous is not None else {"set": new}
    snapshot = new if previous is None or should_snapshot(sequence) else None
    size = len(json.dumps(delta, default=str)) + (len(json.dumps(snapshot, default=str)) if snapshot else 0)
    return {"schema_version": CURRENT_SCHEMA_VERSION, "delta": delta, "snapshot": snapshot,
            "state_hash": state_hash(new), "size_bytes": size}


def state_at(run, sequence: int | None = None) -> tuple[RunState, int]:
    """The run's state after step `sequence` (default: the latest checkpoint) and the sequence of
    the checkpoint it came from. One query: the nearest snapshot at or before it and the deltas
    after it. Each row is upgraded to the current schema before use."""
    from runs.models import Checkpoint

    rows = Checkpoint.objects.filter(run=run)
    if sequence is not None:
        rows = rows.filter(sequence__lte=sequence)
    base = rows.filter(snapshot__isnull=False).order_by("-sequence").values_list("sequence", flat=True)[:1]
    chain = list(rows.filter(sequence__gte=base).order_by("sequence")
                 .values_list("sequence", "schema_version", "delta", "snapshot"))
    if not chain:
        raise LookupError(f"Run {run.pk} has no checkpoint at or before step {sequence}.")
    # A chain may span schema versions (a run checkpointed by older code, resumed by newer
    # code). Each delta is applied to the state in the shape it was written against: upgrade the
    # state only up to the delta's version, apply it, and upgrade to current at the end.
    state = copy.deepcopy(chain[0][3])
    for _seq, version, delta, _snap in chain[1:]:
        state = apply_delta(upgrade(state, to_version=version), delta)
    return RunState.model_validate(upgrade(state)), chain[-1][0]
