"""A run's checkpointed task state (docs/architecture.md, "The run engine"; ADR 0010).

`RunState` is a pydantic model with a `schema_version`. Each checkpoint stores a *delta* (what one
step changed: appended list items, changed dict keys, replaced scalars); the initial checkpoint a
full *snapshot*. Costs are proportional to what a step changed, not to the state:

  - A step's delta is computed from a `StateTracker` (what the fields were when the step began:
    list lengths, a shallow copy of each dict) without copying, dumping or diffing the whole state.
  - The state hash is *structural* (`state_hash`): a list field hashes as a chain over its items, a
    dict field as a sum of per-entry hashes, the whole as a hash over the field digests. It is a
    function of the state alone (two equal states hash alike, whichever path built them), yet a
    `StateDigest` updates it from a delta in O(delta).
  - Compaction by size, not by step count: once the deltas since the last snapshot or compaction
    weigh ARBITER_CHECKPOINT_COMPACT_BYTES, the checkpoint also stores their composition
    (`compose_into`: appended items once more, a changed key once) — never the whole state, so
    every step costs about twice its delta, at step 10 as at step 10,000 (a snapshot of the whole
    growing state every k steps is quadratic).
  - Loading (`state_at`, runs.state_load) is one query: the nearest full snapshot, the compactions
    after it and the deltas after the last compaction (at most ARBITER_CHECKPOINT_COMPACT_BYTES of
    them), applied in place to the freshly decoded rows — no deep copies. The append-only fields'
    items that compactions hold stay in the database until read (runs.state_lists).

Old schema versions are upgraded on load (`upgrade`), one version at a time; checkpoints written by
the previous format (a full snapshot every k steps, the hash of the state's canonical JSON) still
load, and `state_hash_matches` recognises their hashes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from core.hashing import canonical_json, sha256_hex
from runs.state_lists import AppendLog, append_log_of, append_only_fields

CURRENT_SCHEMA_VERSION = 2


class CompletedStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sequence: int
    node: str
    outcome: str


Notes = append_log_of(str)
CompletedSteps = append_log_of(CompletedStep)


class RunState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[2] = 2
    goal: str
    plan: list[str] = Field(default_factory=list)  # nodes still to run; head = the current node
    observations: dict[str, Any] = Field(default_factory=dict)  # node -> validated output dict
    notes: Notes = Field(default_factory=AppendLog)  # append-only (runs.state_lists)
    completed_steps: CompletedSteps = Field(default_factory=AppendLog)  # append-only
    data: dict[str, Any] = Field(default_factory=dict)  # graph scratch (e.g. "replanned": true)
    phase: str = "planning"

    def as_dict(self) -> dict:
        return self.model_dump(mode="json")

    def hash(self) -> str:
        return StateDigest.of_state(self).hexdigest()


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


def upgrade_owned(state: dict, to_version: int = CURRENT_SCHEMA_VERSION) -> dict:
    """`upgrade` for a dict the caller owns: no copy when it is already at `to_version`. Every
    upgrade function builds new top-level containers, so the input is never modified."""
    version = int(state.get("schema_version", 1))
    if version > CURRENT_SCHEMA_VERSION:
        raise SchemaUpgradeError(f"Checkpoint schema version {version} is newer than this code "
                                 f"({CURRENT_SCHEMA_VERSION}); deploy the newer code to load it.")
    while version < to_version:
        state = UPGRADES[version](state)
        version = int(state["schema_version"])
    return state


def upgrade(state: dict, to_version: int = CURRENT_SCHEMA_VERSION) -> dict:
    """Bring a stored state dict to `to_version` (default: current), one version at a time. The
    argument is not modified (the result is a copy)."""
    return upgrade_owned(copy.deepcopy(state), to_version)


def load_state(state: dict) -> RunState:
    return RunState.model_validate(upgrade(state))


# --- the structural state hash -----------------------------------------------------------------
# digest(list)   = chain: h0 = sha256("L"), h(i) = sha256(h(i-1) + sha256(canonical(item i)))
# digest(dict)   = sum over entries of int(sha256("E" + canonical(key) + "\0" + sha256(canonical(v))))
#                  mod 2^256 (order-free, so a changed key is subtract-old + add-new)
# digest(other)  = sha256("S" + canonical(value))
# state_hash     = sha256(canonical({field: "<kind>:<hex digest>"}))
# This hash detects corruption and proves that two states are equal (forks, retention); it is not
# a defence against a forger with database rights — the audit ledger's hash chains are that.

_MOD = 1 << 256
_LIST_SEED = hashlib.sha256(b"L").digest()


def _value_digest(value) -> bytes:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).digest()


def _entry_int(key: str, value) -> int:
    body = b"E" + canonical_json(key).encode("utf-8") + b"\0" + _value_digest(value)
    return int.from_bytes(hashlib.sha256(body).digest(), "big")


def _chain(seed: bytes, items) -> bytes:
    digest = seed
    for item in items:
        digest = hashlib.sha256(digest + _value_digest(item)).digest()
    return digest


@dataclass
class _ListDigest:
    chain: bytes = _LIST_SEED

    def text(self) -> str:
        return "list:" + self.chain.hex()


@dataclass
class _DictDigest:
    total: int = 0
    entries: dict[str, int] = field(default_factory=dict)

    def text(self) -> str:
        return "dict:" + self.total.to_bytes(32, "big").hex()


@dataclass
class _ScalarDigest:
    digest: bytes

    def text(self) -> str:
        return "scalar:" + self.digest.hex()


def _field_digest(value):
    if isinstance(value, list):
        return _ListDigest(_chain(_LIST_SEED, value))
    if isinstance(value, dict):
        entries = {key: _entry_int(key, item) for key, item in value.items()}
        return _DictDigest(sum(entries.values()) % _MOD, entries)
    return _ScalarDigest(hashlib.sha256(b"S" + canonical_json(value).encode("utf-8")).digest())


class StateDigest:
    """The per-field digests of a state (JSON form), kept between steps so the state hash after a
    delta costs O(delta): `apply(delta)` returns the new hash."""

    def __init__(self, state: dict):
        self.fields = {key: _field_digest(value) for key, value in state.items()}

    @classmethod
    def of_state(cls, state: RunState) -> StateDigest:
        """The digests of a RunState, without fetching an append-only field's stored items when the
        checkpoint chain recorded their digest (runs.state_lists)."""
        lazy = append_only_fields(type(state))
        digest = cls(state.model_dump(mode="json", exclude=set(lazy)))
        for name in lazy:
            log = getattr(state, name)
            if isinstance(log, AppendLog) and not log.loaded and log.prefix_chain is not None:
                digest.fields[name] = _ListDigest(_chain(log.prefix_chain,
                                                         to_jsonable_python(log.tail_after_prefix())))
            else:
                digest.fields[name] = _field_digest(to_jsonable_python(list(log)))
        return digest

    def list_chains(self, names) -> dict[str, str]:
        """The chain digests (hex) of the list fields `names`, recorded with a compaction so that a
        later load can hash the state without fetching those lists' stored items."""
        return {key: self.fields[key].chain.hex() for key in names if isinstance(self.fields.get(key), _ListDigest)}

    def hexdigest(self) -> str:
        return sha256_hex(canonical_json({key: digest.text() for key, digest in self.fields.items()}))

    def apply(self, delta: dict) -> str:
        for key, value in delta.get("set", {}).items():
            self.fields[key] = _field_digest(value)
        for key, changes in delta.get("merge", {}).items():
            digest = self.fields.get(key)
            if not isinstance(digest, _DictDigest):
                digest = self.fields[key] = _DictDigest()
            for entry, value in changes.items():
                new = _entry_int(entry, value)
                digest.total = (digest.total - digest.entries.get(entry, 0) + new) % _MOD
                digest.entries[entry] = new
        for key, removed in delta.get("unset", {}).items():
            digest = self.fields.get(key)
            if isinstance(digest, _DictDigest):
                for entry in removed:
                    digest.total = (digest.total - digest.entries.pop(entry, 0)) % _MOD
        for key, items in delta.get("append", {}).items():
            digest = self.fields.get(key)
            if not isinstance(digest, _ListDigest):
                digest = self.fields[key] = _ListDigest()
            digest.chain = _chain(digest.chain, items)
        return self.hexdigest()


def state_hash(state: dict) -> str:
    """The structural hash of a state dict (JSON form, any schema version)."""
    return StateDigest(state).hexdigest()


def legacy_state_hash(state: dict) -> str:
    """The hash checkpoints written before ADR 0010 recorded: sha256 of the canonical JSON."""
    return sha256_hex(canonical_json(state))


def state_hash_matches(state: dict, recorded: str) -> bool:
    """Whether `recorded` (a checkpoint's state_hash, of either format) is this state's hash."""
    return recorded in (state_hash(state), legacy_state_hash(state))


# --- deltas ---------------------------------------------------------------------------------
# A delta is {"set": {field: value}, "merge": {field: {key: value}}, "unset": {field: [keys]},
#             "append": {field: [items]}}.
# Lists that only grew are stored as appends, dicts as changed keys, anything else as a set.

def diff(old: dict, new: dict) -> dict:
    """The delta between two whole states (O(state); used where no tracker exists: tests, tools)."""
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


def apply_delta_in_place(state: dict, delta: dict) -> dict:
    """Apply `delta` to `state`, modifying it. Both must be owned by the caller (freshly decoded
    JSON): values of the delta are put into the state without copying."""
    for key, value in delta.get("set", {}).items():
        state[key] = value
    for key, changes in delta.get("merge", {}).items():
        state.setdefault(key, {}).update(changes)
    for key, removed in delta.get("unset", {}).items():
        for item in removed:
            state.get(key, {}).pop(item, None)
    for key, items in delta.get("append", {}).items():
        state.setdefault(key, []).extend(items)
    return state


def apply_delta(state: dict, delta: dict) -> dict:
    """Apply `delta` to a copy of `state` (neither argument is modified)."""
    return apply_delta_in_place(copy.deepcopy(state), copy.deepcopy(delta))


class StateTracker:
    """What a RunState's fields were when a step began, to compute that step's delta in O(change).

    Cheap to take: a list field is remembered by identity, length and last item; a dict field by a
    shallow copy (references, not values). After the node, a list that is the same object, grew,
    and still ends its old part with the same item is an append; a dict entry whose value is not
    the same object (and not equal) is a merge. Nodes change the state through NodeContext
    (observe, set, note, set_plan), which replaces values and appends items: a value changed *in
    place* (a nested dict mutated without set()) is not seen — the runs contract forbids it."""

    def __init__(self, state: RunState):
        self.fields: dict[str, tuple] = {}
        for name in type(state).model_fields:
            value = getattr(state, name)
            if isinstance(value, AppendLog):
                self.fields[name] = ("log", value, len(value))
            elif isinstance(value, list):
                self.fields[name] = ("list", value, len(value), value[-1] if value else None)
            elif isinstance(value, dict):
                self.fields[name] = ("dict", value, dict(value))
            else:
                self.fields[name] = ("scalar", value)

    def delta(self, state: RunState) -> dict:
        """The delta from the tracked state to `state` (JSON form)."""
        delta: dict[str, dict] = {}
        for name, tracked in self.fields.items():
            value = getattr(state, name)
            kind = tracked[0]
            if kind == "log":
                if value is tracked[1]:  # the same log: it can only have grown
                    appended = value.since(tracked[2])
                    if appended:
                        delta.setdefault("append", {})[name] = to_jsonable_python(appended)
                    continue
                delta.setdefault("set", {})[name] = to_jsonable_python(list(value))
                continue
            if kind == "list" and isinstance(value, list):
                _kind, before, length, last = tracked
                if value is before and len(value) >= length and (length == 0 or value[length - 1] is last):
                    if len(value) > length:
                        delta.setdefault("append", {})[name] = to_jsonable_python(value[length:])
                    continue
                if value is not before and value == before:
                    continue  # replaced by an equal list
                delta.setdefault("set", {})[name] = to_jsonable_python(value)
                continue
            if kind == "dict" and isinstance(value, dict):
                _kind, before, shallow = tracked
                changed = {key: item for key, item in value.items()
                           if key not in shallow or (item is not shallow[key] and item != shallow[key])}
                removed = [key for key in shallow if key not in value]
                if changed:
                    delta.setdefault("merge", {})[name] = to_jsonable_python(changed)
                if removed:
                    delta.setdefault("unset", {})[name] = removed
                continue
            if kind == "scalar" and value == tracked[1] and type(value) is type(tracked[1]):
                continue
            delta.setdefault("set", {})[name] = to_jsonable_python(value)
        return delta


# --- compaction and snapshots --------------------------------------------------------------

def _copy_top(value):
    return value.copy() if isinstance(value, (list, dict)) else value


def compose_into(pending: dict, delta: dict) -> dict:
    """Fold `delta` into `pending` (the composition of the deltas before it), in O(delta): applying
    the result equals applying both in turn. Appends concatenate, merges of a key keep the last
    value, a set drops what came before for that field. `pending` owns everything it holds (the
    delta's containers are copied, one level deep, as they go in)."""
    sets = pending.setdefault("set", {})
    for name, value in delta.get("set", {}).items():
        for category in ("merge", "unset", "append"):
            pending.get(category, {}).pop(name, None)
        sets[name] = _copy_top(value)
    for name, changes in delta.get("merge", {}).items():
        if isinstance(sets.get(name), dict):
            sets[name].update(changes)
            continue
        pending.setdefault("merge", {}).setdefault(name, {}).update(changes)
        unset = pending.get("unset", {}).get(name)
        if unset:
            unset[:] = [key for key in unset if key not in changes]
    for name, removed in delta.get("unset", {}).items():
        if isinstance(sets.get(name), dict):
            for key in removed:
                sets[name].pop(key, None)
            continue
        merged = pending.get("merge", {}).get(name, {})
        unset = pending.setdefault("unset", {}).setdefault(name, [])
        for key in removed:
            merged.pop(key, None)
            if key not in unset:
                unset.append(key)
    for name, items in delta.get("append", {}).items():
        if isinstance(sets.get(name), list):
            sets[name].extend(items)
        else:
            pending.setdefault("append", {}).setdefault(name, []).extend(items)
    for category in ("set", "merge", "unset", "append"):
        if category in pending and not pending[category]:
            del pending[category]
    return pending


_COMPACT = json.JSONEncoder(separators=(",", ":"), default=str)  # made once (see core.hashing)


def _json_size(value) -> int:
    return len(_COMPACT.encode(value))


@dataclass
class Chain:
    """Where a run's checkpoint chain stands: the last checkpoint's sequence, the last row that
    stores a snapshot or a compaction (`marker`), and the composition of the deltas written since
    (`pending`, None when it cannot be composed: deltas of an older schema version)."""

    sequence: int
    marker: int
    pending: dict | None = field(default_factory=dict)
    pending_bytes: int = 0


def checkpoint_fields(*, sequence: int, previous: dict | None, current: RunState) -> dict:
    """The columns of a checkpoint from two whole states (O(state): run_start's initial checkpoint
    and callers without a tracker). The initial checkpoint is a snapshot."""
    new = current.as_dict()
    delta = diff(previous or {}, new) if previous is not None else {"set": new}
    snapshot = new if previous is None else None
    size = _json_size(delta) + (_json_size(snapshot) if snapshot is not None else 0)
    return {"schema_version": CURRENT_SCHEMA_VERSION, "delta": delta, "snapshot": snapshot,
            "state_hash": state_hash(new), "size_bytes": size}


def _store_append_only_items(columns: dict, state: RunState, digest: StateDigest) -> None:
    """Move a compaction's appended items of the append-only fields to `compacted_items`, leaving
    in `compacted` their counts (`stored`) and the fields' digests at this checkpoint (`chains`): a
    later load reads those, not the items, and hashes the state without fetching them
    (runs.state_load)."""
    compacted = columns["compacted"]
    names = append_only_fields(type(state))
    appended = compacted.get("append", {})
    items = {name: appended.pop(name) for name in names if name in appended}
    if "append" in compacted and not appended:
        del compacted["append"]
    compacted["chains"] = digest.list_chains(names)
    if items:
        compacted["stored"] = {name: len(values) for name, values in items.items()}
        columns["compacted_items"] = items
        columns["size_bytes"] += _json_size(items)


def checkpoint_fields_incremental(*, delta: dict, state: RunState, digest: StateDigest, chain: Chain,
                                  sequence: int | None = None) -> dict:
    """The columns of the checkpoint that follows `chain` for a step that made `delta`, in O(delta).

    Once the deltas since the last snapshot or compaction weigh ARBITER_CHECKPOINT_COMPACT_BYTES,
    this checkpoint also stores their composition (`compacted`, relative to that row): appended
    list items once more, changed keys once, never the whole state. Loading a checkpoint then
    reads the initial snapshot, the compactions and at most that many bytes of deltas — storage
    stays a constant number of bytes per step, whatever the run's length. Updates `digest` and
    `chain` to the new checkpoint."""
    delta_bytes = _json_size(delta)
    new_hash = digest.apply(delta)
    # A failed step writes no checkpoint, so the next one may skip a number: say which it is.
    chain.sequence = chain.sequence + 1 if sequence is None else sequence
    columns = {"schema_version": CURRENT_SCHEMA_VERSION, "delta": delta, "state_hash": new_hash,
               "size_bytes": delta_bytes}
    chain.pending_bytes += delta_bytes
    if chain.pending is not None:
        compose_into(chain.pending, delta)
    if chain.pending_bytes >= settings.ARBITER_CHECKPOINT_COMPACT_BYTES:
        if chain.pending is None:  # deltas of an older schema in the window: a full snapshot instead
            columns["snapshot"] = state.as_dict()
            columns["size_bytes"] += _json_size(columns["snapshot"])
        else:
            columns["compacted"], columns["compacted_since"] = chain.pending, chain.marker
            _store_append_only_items(columns, state, digest)
            columns["size_bytes"] += _json_size(columns["compacted"])
        chain.marker, chain.pending, chain.pending_bytes = chain.sequence, {}, 0
    return columns
