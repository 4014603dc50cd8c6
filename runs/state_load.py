"""Loading a run's state from its checkpoint chain (ADR 0010, runs.state).

`load_chain(run, sequence)` reads, in ONE query, the nearest full snapshot at or before `sequence`,
the compactions after it and the deltas after the last of those, and applies them in place to the
freshly decoded rows (no deep copies).

Append-only fields (RunState's `notes` and `completed_steps`, runs.state_lists) are not read
whole: the query leaves the items that compactions hold in the database (PostgreSQL's `#-`,
SQLite's `json_remove`) and returns only their counts; the state gets a `LazyItems` for each
such field — its snapshot items, the counts and where they are, the items the deltas appended since
the last compaction, and the list's digest as that compaction recorded it — which RunState
validation turns into an `AppendLog` that fetches the stored items in one query when first read. So
loading the latest state of a 1,000-step run reads its scalars and dicts, a count per compaction
and at most ARBITER_CHECKPOINT_COMPACT_BYTES of deltas — not 500 KB of appended notes — and the
executor can hash it (StateDigest.of_state) without fetching them.

A chain this reader cannot take lazily (checkpoints of an older schema version, a compaction that
does not follow on from the row before it, a gap left by retention, or `lazy=False`) is read the
eager way: every delta and compaction decoded and applied, as before.
"""

from __future__ import annotations

import copy
import json
from functools import cache

from django.db import connection

from runs.models import Checkpoint
from runs.state import (
    CURRENT_SCHEMA_VERSION,
    Chain,
    RunState,
    apply_delta_in_place,
    compose_into,
    upgrade_owned,
)
from runs.state_lists import CheckpointChanged, LazyItems, append_only_fields

LAZY_FIELDS = append_only_fields(RunState)
_LAST = 2**31 - 1  # "the latest checkpoint": PositiveIntegerField's ceiling
_CHAIN_COLUMNS = ("sequence", "schema_version", "delta", "snapshot", "compacted", "compacted_since", "size_bytes",
                  "compacted_items")


def _decode(value):
    return json.loads(value) if isinstance(value, (str, bytes)) else value


@cache
def _lazy_rows_sql(vendor: str) -> str:
    """The chain's rows with the compactions' appended items of the append-only fields left out
    and counted. The base snapshot and the compactions are found through partial indexes on the
    rows that hold them (runs 0005), so the query does not walk the run's steps."""
    if vendor == "postgresql":
        stripped = "c.compacted" + "".join(f" #- '{{append,{name}}}'" for name in LAZY_FIELDS)
        counts = [f"jsonb_array_length(c.compacted #> '{{append,{name}}}')" for name in LAZY_FIELDS]
    else:
        paths = ", ".join(f"'$.append.{name}'" for name in LAZY_FIELDS)
        stripped = f"json_remove(c.compacted, {paths})"
        counts = [f"json_array_length(c.compacted, '$.append.{name}')" for name in LAZY_FIELDS]
    # A UNION's first branch types its columns: PostgreSQL needs its NULLs typed.
    json_null, int_null = ("NULL::jsonb", "NULL::integer") if vendor == "postgresql" else ("NULL", "NULL")
    none = ", ".join(int_null for _ in LAZY_FIELDS)
    return f"""
        WITH base AS (
            SELECT max(sequence) AS s FROM runs_checkpoint
            WHERE run_id = %(run)s AND snapshot IS NOT NULL AND sequence <= %(upto)s
        ), marker AS (
            SELECT coalesce(max(sequence), (SELECT s FROM base)) AS s FROM runs_checkpoint
            WHERE run_id = %(run)s AND compacted IS NOT NULL AND sequence > (SELECT s FROM base)
              AND sequence <= %(upto)s
        )
        SELECT c.sequence, c.schema_version, {json_null}, c.snapshot, {json_null}, c.compacted_since, c.size_bytes,
               {none}
        FROM runs_checkpoint c WHERE c.run_id = %(run)s AND c.sequence = (SELECT s FROM base)
        UNION ALL
        SELECT c.sequence, c.schema_version, NULL, NULL, {stripped}, c.compacted_since, c.size_bytes,
               {", ".join(counts)}
        FROM runs_checkpoint c WHERE c.run_id = %(run)s AND c.compacted IS NOT NULL
          AND c.sequence > (SELECT s FROM base) AND c.sequence <= (SELECT s FROM marker)
        UNION ALL
        SELECT c.sequence, c.schema_version, c.delta, NULL, NULL, c.compacted_since, c.size_bytes, {none}
        FROM runs_checkpoint c WHERE c.run_id = %(run)s AND c.sequence > (SELECT s FROM marker)
          AND c.sequence <= %(upto)s
        ORDER BY 1"""


@cache
def _items_sql(vendor: str, name: str) -> str:
    # Compactions keep these items in compacted_items; those written before, in compacted.
    if vendor == "postgresql":
        return (f"SELECT sequence, coalesce(compacted_items -> '{name}', compacted #> '{{append,{name}}}') "
                "FROM runs_checkpoint WHERE run_id = %s AND sequence = ANY(%s) ORDER BY sequence")
    return (f"SELECT sequence, coalesce(json_extract(compacted_items, '$.{name}'), "
            f"json_extract(compacted, '$.append.{name}')) FROM runs_checkpoint "
            "WHERE run_id = %s AND sequence IN (SELECT value FROM json_each(%s)) ORDER BY sequence")


def _fetcher(run_id: int, name: str, segments: list[tuple[int, int]]):
    """A function returning the raw items the compactions `segments` ((sequence, count), in order)
    appended to field `name`: one query; CheckpointChanged if they are not all there as counted."""
    def fetch() -> list:
        sequences = [sequence for sequence, _count in segments]
        argument = sequences if connection.vendor == "postgresql" else json.dumps(sequences)
        with connection.cursor() as cursor:
            cursor.execute(_items_sql(connection.vendor, name), [run_id, argument])
            found = {sequence: _decode(value) for sequence, value in cursor.fetchall()}
        items: list = []
        for sequence, count in segments:
            part = found.get(sequence)
            if not isinstance(part, list) or len(part) != count:
                raise CheckpointChanged(f"Run {run_id}: checkpoint {sequence} no longer holds the {count} "
                                        f"'{name}' items it held when the state was read; load it again.")
            items.extend(part)
        return items

    return fetch


class _Field:
    """An append-only field while its chain is read: in-memory items before the stored ones
    (`prefix`), the stored segments, the digest up to their end, the items appended after them."""

    __slots__ = ("prefix", "segments", "chain", "tail")

    def __init__(self, prefix: list):
        self.prefix, self.segments, self.chain, self.tail = prefix, [], None, []

    def reset(self, items: list) -> None:
        self.prefix, self.segments, self.chain, self.tail = list(items), [], None, []

    def lazy(self, run_id: int, name: str) -> LazyItems:
        stored = sum(count for _sequence, count in self.segments)
        fetch = _fetcher(run_id, name, self.segments) if stored else None
        return LazyItems(self.prefix, stored, fetch, self.tail, self.chain)


def _load_lazily(run_id: int, sequence: int | None) -> tuple[dict, Chain] | None:
    """The state dict with a LazyItems per append-only field, or None when the chain must be read
    the eager way."""
    with connection.cursor() as cursor:
        cursor.execute(_lazy_rows_sql(connection.vendor),
                       {"run": run_id, "upto": _LAST if sequence is None else sequence})
        rows = cursor.fetchall()
    if not rows or any(row[1] != CURRENT_SCHEMA_VERSION for row in rows):
        return None
    first = rows[0]
    if first[3] is None:
        return None
    state = _decode(first[3])
    fields = {name: _Field(list(state.pop(name, []))) for name in LAZY_FIELDS}
    position = marker = first[0]
    pending: dict = {}
    pending_bytes = 0
    for seq, _version, delta, _snapshot, compacted, since, size, *counts in rows[1:]:
        if compacted is not None:
            if since != position or pending:
                return None
            compacted = _decode(compacted)
            chains = compacted.pop("chains", None) or {}
            stored = compacted.pop("stored", None)
            if stored is not None:  # the items are in compacted_items; before, in compacted itself
                counts = [stored.get(name, 0) for name in fields]
            sets = compacted.get("set", {})
            for (name, field), count in zip(fields.items(), counts, strict=True):
                if name in sets:
                    field.reset(sets.pop(name))
                if count:
                    field.segments.append((seq, count))
                field.chain = bytes.fromhex(chains[name]) if name in chains else None
            apply_delta_in_place(state, compacted)
            position = marker = seq
            continue
        if seq != position + 1:
            return None  # a gap the compactions do not bridge
        delta = _decode(delta)
        for name, field in fields.items():
            if name in delta.get("set", {}):
                field.reset(delta["set"][name])
            field.tail.extend(delta.get("append", {}).get(name, ()))
        apply_delta_in_place(state, _without(delta, fields))
        compose_into(pending, copy.deepcopy(delta))
        pending_bytes += size
        position = seq
    for name, field in fields.items():
        state[name] = field.lazy(run_id, name)
    return state, Chain(sequence=position, marker=marker, pending=pending, pending_bytes=pending_bytes)


def _without(delta: dict, names) -> dict:
    return {kind: {key: value for key, value in changes.items() if key not in names}
            for kind, changes in delta.items()}


# --- the eager reader --------------------------------------------------------------------------

def _chain_rows(run, sequence: int | None) -> list[tuple]:
    """One query: the nearest full snapshot at or before `sequence`, the compactions after it, and
    the deltas after the last snapshot or compaction — every column, decoded."""
    from django.db.models import Q, Subquery


    rows = Checkpoint.objects.filter(run=run)
    if sequence is not None:
        rows = rows.filter(sequence__lte=sequence)
    base = rows.filter(snapshot__isnull=False).order_by("-sequence").values("sequence")[:1]
    marker = (rows.filter(Q(snapshot__isnull=False) | Q(compacted__isnull=False), sequence__gte=Subquery(base))
              .order_by("-sequence").values("sequence")[:1])
    return list(rows.filter(Q(sequence=Subquery(base)) | Q(sequence__gt=Subquery(base), compacted__isnull=False)
                            | Q(sequence__gt=Subquery(marker)))
                .order_by("sequence").values_list(*_CHAIN_COLUMNS))


def _load_eagerly(run, sequence: int | None) -> tuple[dict, Chain]:
    rows = _chain_rows(run, sequence)
    if not rows:
        raise LookupError(f"Run {run.pk} has no checkpoint at or before step {sequence}.")
    state = rows[0][3]  # freshly decoded: ours to modify
    position = marker = rows[0][0]
    pending: dict | None = {}
    pending_bytes = 0
    for seq, version, delta, _snapshot, compacted, since, size, items in rows[1:]:
        if compacted is not None and since == position and pending == {}:
            compacted.pop("chains", None)
            compacted.pop("stored", None)
            if items:
                compacted.setdefault("append", {}).update(items)
            state = apply_delta_in_place(upgrade_owned(state, to_version=version), compacted)
            position = marker = seq
            continue
        if seq != position + 1:
            # A gap the compactions do not bridge (retention removed the row a compaction was
            # relative to): read every delta after `position` instead.
            return _load_deltas_after(run, state, position, marker, pending, pending_bytes, sequence)
        state = apply_delta_in_place(upgrade_owned(state, to_version=version), delta)
        pending, pending_bytes = _pend(pending, delta, version, pending_bytes, size)
        position = seq
    return upgrade_owned(state), Chain(sequence=position, marker=marker, pending=pending, pending_bytes=pending_bytes)


def _pend(pending: dict | None, delta: dict, version: int, pending_bytes: int, size: int):
    if pending is not None and version == CURRENT_SCHEMA_VERSION:
        compose_into(pending, copy.deepcopy(delta))
    else:
        pending = None
    return pending, pending_bytes + size


def _load_deltas_after(run, state, position, marker, pending, pending_bytes, sequence):
    rows = Checkpoint.objects.filter(run=run, sequence__gt=position)
    if sequence is not None:
        rows = rows.filter(sequence__lte=sequence)
    for seq, version, delta, size in rows.order_by("sequence").values_list("sequence", "schema_version", "delta",
                                                                           "size_bytes"):
        state = apply_delta_in_place(upgrade_owned(state, to_version=version), delta)
        pending, pending_bytes = _pend(pending, delta, version, pending_bytes, size)
        position = seq
    return upgrade_owned(state), Chain(sequence=position, marker=marker, pending=pending, pending_bytes=pending_bytes)


def load_chain(run, sequence: int | None = None, *, lazy: bool = True) -> tuple[dict, Chain]:
    """The run's state dict (current schema, not validated) after step `sequence` (default: the
    latest checkpoint) and where its chain stands. With `lazy` (the default) an append-only field is
    a LazyItems whose stored items RunState validation leaves to be fetched when read; otherwise, and
    for a chain only the eager reader can take, every field is a plain value. A chain may span
    schema versions (a run checkpointed by older code, resumed by newer code): the eager reader
    applies each delta to the state in the shape it was written against — upgraded only as far as
    that delta's version, and to current at the end. Checkpoints of the previous format (a full
    snapshot every k steps) load the same way."""
    if lazy:
        loaded = _load_lazily(run.pk, sequence)
        if loaded is not None:
            return loaded
    return _load_eagerly(run, sequence)


def state_at(run, sequence: int | None = None, *, lazy: bool = True) -> tuple[RunState, int]:
    """The run's state after step `sequence` (default: the latest checkpoint) and the sequence of
    the checkpoint it came from, validated against the current schema (see load_chain). A caller
    that will read every item of the append-only fields anyway passes lazy=False: one query, and no
    later fetch that retention could have raced."""
    state, chain = load_chain(run, sequence, lazy=lazy)
    return RunState.model_validate(state), chain.sequence
