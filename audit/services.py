"""The only write path into the audit ledger."""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.hashing import canonical_json, current_key_id, event_hash, event_hash_encoded
from audit.hooks import run_after_record, run_after_record_many
from audit.models import AuditEvent, AuditStreamHead
from core.bulk import copy_rows, insert_rows, reserve_id_values


def stream_for(*, tenant_id: int | None, case_id: int | None = None) -> str:
    """A case's events chain per case; events about no case chain per tenant, so
    concurrent work on different cases never queues behind one chain head."""
    if case_id is not None:
        return f"case:{case_id}"
    return f"tenant:{tenant_id}" if tenant_id is not None else "global"


def audit_record(
    *,
    tenant_id: int | None,
    actor_type: str,
    actor_id: str,
    action: str,
    case_id: int | None = None,
    target_type: str = "",
    target_id: str | int = "",
    run_id: str = "",
    policy_version: str = "",
    decision: str = "",
    evidence_refs: list | None = None,
    payload: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to its stream's hash chain.

    Must run inside the transaction of the change it records (it refuses otherwise), so the
    event and the change commit or roll back together. The stream head row is locked, so
    concurrent writers to one stream queue briefly while different streams never contend."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record must be called inside the transaction of the change it records.")
    stream = stream_for(tenant_id=tenant_id, case_id=case_id)
    head_id, last_sequence, last_hash = _lock_or_create_head(connection, stream)
    event = audit_event_build(tenant_id=tenant_id, stream=stream, sequence=last_sequence + 1, prev_hash=last_hash,
                              actor_type=actor_type, actor_id=actor_id, action=action, target_type=target_type,
                              target_id=target_id, run_id=run_id, policy_version=policy_version, decision=decision,
                              evidence_refs=evidence_refs, payload=payload)
    # Written with SQL prepared once (the same rows the ORM would write): on the step hot path the
    # ORM's per-call query compilation cost more than the database did (ADR 0010).
    params = audit_event_params(event, connection)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # the event and the head's advance in one statement
            cursor.execute(f"WITH event AS ({_event_insert_sql(connection.vendor)}) UPDATE audit_auditstreamhead "
                           f"SET last_sequence = %s, last_hash = %s WHERE id = %s RETURNING (SELECT id FROM event)",
                           [*params, event.sequence, event.hash, head_id])
            event.pk = cursor.fetchone()[0]
        else:
            cursor.execute(_event_insert_sql(connection.vendor), params)
            event.pk = cursor.fetchone()[0]
            cursor.execute("UPDATE audit_auditstreamhead SET last_sequence = %s, last_hash = %s WHERE id = %s",
                           [event.sequence, event.hash, head_id])
    # What this transaction makes the head; if it rolls back, a writer trusting this guess fails its
    # compare-and-set (audit_head_guess) and takes the locking path.
    audit_head_remember(stream, (head_id, event.sequence, event.hash))
    event._state.adding = False
    event._state.db = connection.alias
    run_after_record(event)  # in this same transaction (audit/hooks.py; integrations: ADR 0009)
    return event


def audit_record_many(events: list[dict[str, Any]]) -> list[AuditEvent]:
    """Append many events at once, each chained in its stream exactly as audit_record would chain it,
    in the order given: for bulk writers (the complaint import) that record thousands of events in
    one transaction. Each item holds audit_record's keyword arguments.

    Same rules as audit_record: inside the transaction of the change (refused otherwise); the heads
    of every stream written are locked before any event is appended, tenant streams before case
    streams and each kind in name order (the lock order of docs/architecture.md), so two batches
    never wait on each other in opposite orders. A handful of statements whatever the number of
    events; the listeners (audit/hooks.py) see every event, in order, in this transaction."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record_many must be called inside the transaction of the change it records.")
    if not events:
        return []
    streams = [stream_for(tenant_id=item.get("tenant_id"), case_id=item.get("case_id")) for item in events]
    heads = _lock_or_create_heads(connection, sorted(set(streams)))
    built, encoded = [], []
    field_names = [field.attname for field in _event_fields()]
    for stream, item in zip(streams, events, strict=True):
        head_id, last_sequence, last_hash = heads[stream]
        fields = {key: value for key, value in item.items() if key != "case_id"}
        values, payload_json, refs_json = _event_values_encoded(stream=stream, sequence=last_sequence + 1,
                                                                prev_hash=last_hash, **fields)
        event = AuditEvent(None, *(values[name] for name in field_names))  # positional: the quick way in
        heads[stream] = (head_id, event.sequence, event.hash)
        built.append(event)
        encoded.append((values, payload_json, refs_json))
    if connection.vendor == "postgresql":
        _copy_events(connection, built, encoded)
    else:
        insert_rows(built)  # new rows; the ledger refuses only changes
    _advance_heads(connection, list(heads.values()))
    for stream, head in heads.items():
        audit_head_remember(stream, head)
    run_after_record_many(built)
    return built


def _event_values_encoded(*, evidence_refs: list | None = None, payload: dict[str, Any] | None = None,
                          **fields) -> tuple[dict[str, Any], str, str]:
    """audit_event_values's field values for a bulk writer, with the event's payload and evidence
    refs encoded once (canonical JSON): that text is hashed inside the body (event_hash_encoded, the
    same hash) and sent to the database as it is."""
    values = audit_event_values(evidence_refs=evidence_refs, payload=payload, with_hash=False, **fields)
    refs = values["evidence_refs"]
    payload_json, refs_json = canonical_json(values["payload"]), canonical_json(refs) if refs else "[]"
    values["hash"] = event_hash_encoded(values, payload_json=payload_json, evidence_refs_json=refs_json)
    return values, payload_json, refs_json


def _copy_events(connection, built: list[AuditEvent], encoded: list[tuple[dict, str, str]]) -> None:
    """COPY the events as plain rows, the payload and evidence refs as the JSON text that was hashed."""
    fields = _event_fields()
    ids = reserve_id_values(AuditEvent, len(built), using=connection.alias)
    rows = []
    for event, pk, (values, payload_json, refs_json) in zip(built, ids, encoded, strict=True):
        event.pk = pk
        event._state.adding = False
        event._state.db = connection.alias
        values = values | {"payload": payload_json, "evidence_refs": refs_json}
        rows.append((pk, *(values[field.attname] for field in fields)))
    copy_rows(AuditEvent, ["id", *(field.column for field in fields)], rows, using=connection.alias)


def _advance_heads(connection, heads: list[tuple[int, int, str]]) -> None:
    """Set each (id, last_sequence, last_hash) head in one statement (the heads are locked)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("UPDATE audit_auditstreamhead AS head SET last_sequence = new.sequence, last_hash = new.hash "
                           "FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) AS new(id, sequence, hash) "
                           "WHERE head.id = new.id",
                           [[head[0] for head in heads], [head[1] for head in heads], [head[2] for head in heads]])
        return
    AuditStreamHead.objects.bulk_update(
        [AuditStreamHead(pk=head_id, last_sequence=sequence, last_hash=last_hash) for head_id, sequence, last_hash in heads],
        ["last_sequence", "last_hash"])


def _lock_or_create_heads(connection, streams: list[str]) -> dict[str, tuple[int, int, str]]:
    """{stream: (id, last_sequence, last_hash)} of every stream, created where missing, locked."""
    if connection.vendor == "postgresql":
        return _lock_or_create_heads_sql(connection, streams)
    AuditStreamHead.objects.bulk_create([AuditStreamHead(stream=stream) for stream in streams],
                                        ignore_conflicts=True)
    rows = {}
    # Tenant (and global) streams first, then case streams: each query locks its rows in stream order.
    for group in ([s for s in streams if not s.startswith("case:")], [s for s in streams if s.startswith("case:")]):
        if not group:
            continue
        query = AuditStreamHead.objects.filter(stream__in=group).order_by("stream")
        if connection.features.has_select_for_update:
            query = query.select_for_update()
        rows |= {stream: (pk, sequence, last_hash) for pk, stream, sequence, last_hash
                 in query.values_list("pk", "stream", "last_sequence", "last_hash")}
    return {stream: rows[stream] for stream in streams}


def _lock_or_create_heads_sql(connection, streams: list[str]) -> dict[str, tuple[int, int, str]]:
    """_lock_or_create_heads on PostgreSQL, each step one statement over an array of the streams
    (no model instance, no query with a placeholder per stream): the same rows, the same order."""
    rows = {}
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO audit_auditstreamhead (stream, last_sequence, last_hash) "
                       "SELECT stream, 0, '' FROM unnest(%s::text[]) WITH ORDINALITY AS new(stream, position) "
                       "ORDER BY position ON CONFLICT (stream) DO NOTHING", [streams])
        for group in ([s for s in streams if not s.startswith("case:")], [s for s in streams if s.startswith("case:")]):
            if group:
                cursor.execute("SELECT id, stream, last_sequence, last_hash FROM audit_auditstreamhead "
                               "WHERE stream = ANY(%s::text[]) ORDER BY stream FOR UPDATE", [group])
                rows |= {stream: (pk, sequence, last_hash) for pk, stream, sequence, last_hash in cursor.fetchall()}
    return {stream: rows[stream] for stream in streams}


def audit_event_build(*, tenant_id: int | None, stream: str, sequence: int, prev_hash: str, actor_type: str,
                      actor_id: str, action: str, target_type: str = "", target_id: str | int = "", run_id: str = "",
                      policy_version: str = "", decision: str = "", evidence_refs: list | None = None,
                      payload: dict[str, Any] | None = None) -> AuditEvent:
    """The event that follows (sequence - 1, prev_hash) in `stream`, hashed, not saved."""
    return AuditEvent(**audit_event_values(
        tenant_id=tenant_id, stream=stream, sequence=sequence, prev_hash=prev_hash, actor_type=actor_type,
        actor_id=actor_id, action=action, target_type=target_type, target_id=target_id, run_id=run_id,
        policy_version=policy_version, decision=decision, evidence_refs=evidence_refs, payload=payload))


def audit_event_values(*, tenant_id: int | None, stream: str, sequence: int, prev_hash: str, actor_type: str,
                       actor_id: str, action: str, target_type: str = "", target_id: str | int = "", run_id: str = "",
                       policy_version: str = "", decision: str = "", evidence_refs: list | None = None,
                       payload: dict[str, Any] | None = None, with_hash: bool = True) -> dict[str, Any]:
    """audit_event_build's event as its field values (attname -> value, `hash` included), without a
    model instance: what the executor's one-statement step commit writes. The hash is event_hash's
    over the same values (it reads them as attributes), so the chain is the one audit_record writes;
    keyed with the current audit key (ADR 0017). With `with_hash=False`, no hash (a bulk writer hashes
    them itself, event_hash_encoded)."""
    values = {
        "tenant_id": tenant_id, "stream": stream, "sequence": sequence, "actor_type": actor_type,
        "actor_id": actor_id, "action": action, "target_type": target_type, "target_id": str(target_id),
        "run_id": str(run_id or ""), "policy_version": policy_version, "decision": decision,
        # Round-tripped through JSON now so the hash is computed over exactly what the database returns.
        "evidence_refs": _json_roundtrip(list(evidence_refs or [])),
        "payload": _json_roundtrip(dict(payload or {})),
        "created_at": timezone.now(), "prev_hash": prev_hash, "key_id": current_key_id(),
    }
    if with_hash:
        values["hash"] = event_hash(SimpleNamespace(**values))
    return values


def audit_event_params(event: AuditEvent, connection) -> list:
    """The INSERT parameters of `event`, in the column order of audit_event_insert_sql."""
    return [field.get_db_prep_save(getattr(event, field.attname), connection) for field in _event_fields()]


def audit_event_fields() -> tuple:
    """The fields of AuditEvent that audit_event_params fills, in its order (every one but id)."""
    return _event_fields()


# --- the head guess (ADR 0010) -------------------------------------------------------------------
# stream -> (head id, last_sequence, last_hash) as this process last wrote it. A writer that appends
# without locking the head (the executor's one-statement step commit) advances it by compare-and-set
# on these values: if anyone else appended since, or the transaction that wrote the guess rolled
# back, nothing matches and it falls back to audit_record, which locks the head.
_HEAD_GUESS: dict[str, tuple[int, int, str]] = {}
_HEAD_GUESS_LIMIT = 4096


def audit_head_guess(stream: str) -> tuple[int, int, str] | None:
    return _HEAD_GUESS.get(stream)


def audit_head_remember(stream: str, head: tuple[int, int, str] | None) -> None:
    """Record (or, with None, forget) what this process believes the stream's head is."""
    if head is None:
        _HEAD_GUESS.pop(stream, None)
        return
    if len(_HEAD_GUESS) >= _HEAD_GUESS_LIMIT and stream not in _HEAD_GUESS:
        _HEAD_GUESS.pop(next(iter(_HEAD_GUESS)))
    _HEAD_GUESS[stream] = head


def audit_head_lock(*, tenant_id: int | None, case_id: int | None = None) -> None:
    """Lock the head of the stream audit_record(tenant_id=, case_id=) appends to, now, inside the
    caller's transaction. For a service that must lock rows which rank after the audit head in the
    lock order (webhook endpoints and deliveries, ADR 0022) before it records its event: taking the
    head first is what keeps it from waiting on the head while holding such a row."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_head_lock must be called inside the transaction of the change it records.")
    _lock_or_create_head(connection, stream_for(tenant_id=tenant_id, case_id=case_id))


def _lock_or_create_head(connection, stream: str) -> tuple[int, int, str]:
    head = _lock_head(connection, stream)
    if head is None:
        # A new stream: INSERT ... ON CONFLICT DO NOTHING, then lock. Two first writers cannot both
        # create it (the second's insert waits for the first to commit, then does nothing).
        AuditStreamHead.objects.bulk_create([AuditStreamHead(stream=stream)], ignore_conflicts=True)
        head = _lock_head(connection, stream)
    return head


def _lock_head(connection, stream: str):
    """(id, last_sequence, last_hash) of the stream's head, locked FOR UPDATE where the database
    has row locks (SQLite serialises writers anyway), or None."""
    sql = "SELECT id, last_sequence, last_hash FROM audit_auditstreamhead WHERE stream = %s"
    if connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, [stream])
        return cursor.fetchone()


@lru_cache(maxsize=1)
def _event_fields():
    return tuple(field for field in AuditEvent._meta.concrete_fields if not field.primary_key)


@lru_cache(maxsize=4)
def _event_insert_sql(vendor: str) -> str:
    fields = _event_fields()
    columns = ", ".join(f'"{field.column}"' for field in fields)
    return (f"INSERT INTO audit_auditevent ({columns}) VALUES ({', '.join(['%s'] * len(fields))}) "
            f"RETURNING id")


def _json_roundtrip(value):
    """`value` as the database gives it back, so the hash taken now verifies later. PostgreSQL's jsonb
    keeps numbers as numeric: it has no negative zero, and writes a float Python spells with a
    positive exponent ("1e+16") as the integer it is. Read them that way here, on every backend."""
    import json

    copied = _plain_copy(value)
    if copied is not _NOT_PLAIN:
        return copied
    return json.loads(json.dumps(value, default=str), parse_float=_as_jsonb_number)


_PLAIN_SCALARS = frozenset((str, int, bool, type(None)))
_NOT_PLAIN = object()


def _plain_copy(value, depth: int = 0):
    """A copy of `value`, as json.loads makes one, if it holds only str-keyed dicts, lists, exact
    strs, ints, bools and None: JSON gives back an equal value (no float to reread, no tuple or
    subclass to convert). Otherwise _NOT_PLAIN. One pass: it checks and copies as it goes."""
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return value
    if depth > 8 or kind not in (dict, list):
        return _NOT_PLAIN
    pairs = value.items() if kind is dict else enumerate(value)
    copied = {} if kind is dict else [None] * len(value)
    for key, item in pairs:
        if kind is dict and type(key) is not str:
            return _NOT_PLAIN
        if type(item) not in _PLAIN_SCALARS:
            item = _plain_copy(item, depth + 1)
            if item is _NOT_PLAIN:
                return _NOT_PLAIN
        copied[key] = item
    return copied


def _as_jsonb_number(text: str):
    from decimal import Decimal

    number = Decimal(text)
    if number == 0:
        return 0.0
    if "e" in text.lower() and number == number.to_integral_value():
        return int(number)
    return float(text)
