"""Walk the audit hash chains and report the first event of each stream that does not match.

Streaming at ledger scale (ADR 0010): one ordered scan over every event, read in batches through a
server-side cursor on PostgreSQL, merged with an ordered scan of the stream heads — constant memory
and no round trip per stream. `since=True` verifies incrementally: each stream resumes from its
last verified head (AuditVerifiedHead: sequence and hash of the last event a verification passed,
recorded when it passes), so a nightly verification costs what was appended since. What was
verified before is trusted then; a full verification (the default) re-checks everything."""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from audit.hashing import HASHED_FIELDS, event_hash
from audit.models import AuditEvent, AuditVerifiedHead


@dataclass
class ChainBreak:
    stream: str
    event_id: int | None
    sequence: int
    reason: str


@dataclass
class VerifyResult:
    streams: int
    events: int
    breaks: list[ChainBreak]


_COLUMNS = ("id", "hash", *HASHED_FIELDS, "created_at")
Event = namedtuple("Event", _COLUMNS)


@lru_cache(maxsize=4)
def _converters(vendor: str) -> list[tuple]:
    """The database's and the fields' converters per selected column (what the ORM applies)."""
    converters = []
    for index, name in enumerate(_COLUMNS):
        field = AuditEvent._meta.get_field(name.removesuffix("_id") if name == "tenant_id" else name)
        column = field.get_col(AuditEvent._meta.db_table)
        found = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        if found:
            converters.append((index, column, found))
    return converters


def _order(expression: str) -> str:
    # Byte order on both databases, so the two scans merge in Python's string order.
    return f'{expression} COLLATE "C"' if connection.vendor == "postgresql" else expression


def _scan(sql: str, params: list, *, convert: bool) -> Iterator[tuple]:
    """Rows of `sql`, fetched in batches of ARBITER_AUDIT_VERIFY_BATCH_SIZE through a server-side
    cursor on PostgreSQL (Django's chunked cursor), converted like the ORM would."""
    batch = settings.ARBITER_AUDIT_VERIFY_BATCH_SIZE
    converters = _converters(connection.vendor) if convert else ()
    with transaction.atomic():  # a server-side cursor lives in a transaction
        cursor = connection.chunked_cursor()
        try:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(batch):
                for row in rows:
                    if converters:
                        row = list(row)
                        for index, column, functions in converters:
                            for function in functions:
                                row[index] = function(row[index], column, connection)
                    yield row
        finally:
            cursor.close()


class _IsoText(str):
    """A timestamp already in the text `datetime.isoformat(timespec="microseconds")` gives."""

    def isoformat(self, timespec: str = "microseconds") -> str:
        return str(self)


_EVIDENCE, _PAYLOAD, _CREATED = _COLUMNS.index("evidence_refs"), _COLUMNS.index("payload"), _COLUMNS.index("created_at")
_PG_EXPRESSIONS = {
    "evidence_refs": "e.evidence_refs::text", "payload": "e.payload::text",
    "created_at": """to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')""",
}


def _event_rows(streams: list[str] | None, since: bool) -> Iterator[Event]:
    if connection.vendor == "postgresql":
        columns = ", ".join(_PG_EXPRESSIONS.get(name, f"e.{name}") for name in _COLUMNS)
    else:
        columns = ", ".join(f"e.{name}" for name in _COLUMNS)
    where, params = [], []
    if since and connection.vendor == "postgresql":
        # Driven by the heads of streams that changed since they were verified, each read from its
        # verified event on by an index range scan: the cost is what was appended.
        source = ("audit_auditstreamhead h LEFT JOIN audit_auditverifiedhead v ON v.stream = h.stream "
                  "CROSS JOIN LATERAL (SELECT * FROM audit_auditevent x WHERE x.stream = h.stream "
                  "AND x.sequence >= COALESCE(v.sequence, 1)) e")
        where.append("(h.last_sequence <> COALESCE(v.sequence, 0) OR h.last_hash <> COALESCE(v.hash, ''))")
    elif since:
        source = ("audit_auditevent e LEFT JOIN audit_auditverifiedhead v ON v.stream = e.stream "
                  "LEFT JOIN audit_auditstreamhead h ON h.stream = e.stream")
        where.append("e.sequence >= COALESCE(v.sequence, 1) AND (h.id IS NULL OR h.last_sequence <> "
                     "COALESCE(v.sequence, 0) OR h.last_hash <> COALESCE(v.hash, ''))")
    else:
        source = "audit_auditevent e"
    if streams is not None:
        where.append(f"e.stream IN ({', '.join(['%s'] * len(streams))})")
        params += streams
    sql = (f"SELECT {columns} FROM {source} {'WHERE ' + ' AND '.join(where) if where else ''} "
           f"ORDER BY {_order('e.stream')}, e.sequence")
    if connection.vendor != "postgresql":
        for row in _scan(sql, params, convert=True):
            yield Event(*row)
        return
    # PostgreSQL: the timestamp as the exact text the hash is computed over, the JSON decoded once
    # here — the ORM's per-value converters were most of the walk's cost.
    loads = json.loads
    for row in _scan(sql, params, convert=False):
        row = list(row)
        row[_EVIDENCE], row[_PAYLOAD], row[_CREATED] = loads(row[_EVIDENCE]), loads(row[_PAYLOAD]), _IsoText(row[_CREATED])
        yield Event(*row)


def _head_rows(streams: list[str] | None) -> Iterator[tuple]:
    """(stream, last_sequence, last_hash, verified_sequence, verified_hash) for every stream with a
    head or a verified head, in stream order."""
    where, params = "", []
    if streams is not None:
        where = f"WHERE s.stream IN ({', '.join(['%s'] * len(streams))})"
        params = streams
    sql = (f"SELECT s.stream, h.last_sequence, h.last_hash, v.sequence, v.hash FROM "
           f"(SELECT stream FROM audit_auditstreamhead UNION SELECT stream FROM audit_auditverifiedhead) s "
           f"LEFT JOIN audit_auditstreamhead h ON h.stream = s.stream "
           f"LEFT JOIN audit_auditverifiedhead v ON v.stream = s.stream {where} ORDER BY {_order('s.stream')}")
    yield from _scan(sql, params, convert=False)


def _key(stream: str) -> bytes:
    return stream.encode("utf-8")


class _StreamCheck:
    """The state of one stream's walk: what the next event must look like."""

    def __init__(self, stream: str, verified_sequence: int | None, verified_hash: str | None):
        self.stream = stream
        self.broken: ChainBreak | None = None
        self.last: tuple[int, str] | None = None
        if verified_sequence:
            # Resume: the verified event itself is read again and must be unchanged.
            self.expected_sequence, self.expected_prev = verified_sequence, None
            self.verified = (verified_sequence, verified_hash)
        else:
            self.expected_sequence, self.expected_prev, self.verified = 1, "", None

    def feed(self, event: Event) -> None:
        if self.broken is not None:
            return
        if event.sequence != self.expected_sequence:
            self.broken = ChainBreak(self.stream, event.id, event.sequence,
                                     f"sequence gap: expected {self.expected_sequence}, found {event.sequence}")
        elif self.expected_prev is not None and event.prev_hash != self.expected_prev:
            self.broken = ChainBreak(self.stream, event.id, event.sequence,
                                     "prev_hash does not match the previous event")
        elif self.verified is not None and event.sequence == self.verified[0] and event.hash != self.verified[1]:
            self.broken = ChainBreak(self.stream, event.id, event.sequence,
                                     "the last verified event changed since it was verified")
        elif event_hash(event) != event.hash:
            self.broken = ChainBreak(self.stream, event.id, event.sequence,
                                     "stored hash does not match the event's content")
        else:
            self.expected_prev = event.hash
            self.expected_sequence += 1
            self.last = (event.sequence, event.hash)

    def finish(self, head_sequence: int | None, head_hash: str | None) -> ChainBreak | None:
        if self.broken is not None:
            return self.broken
        if self.verified is not None and self.last is None:
            return ChainBreak(self.stream, None, self.verified[0],
                              "the last verified event was removed (events removed from the end?)")
        last_sequence, last_hash = self.last if self.last else (0, "")
        if head_sequence is not None and (head_sequence != last_sequence or head_hash != last_hash):
            return ChainBreak(self.stream, None, head_sequence,
                              "stream head does not match the last event (events removed from the end?)")
        return None


def verify_ledger(streams: list[str] | None = None, *, since: bool = False, record: bool = True) -> VerifyResult:
    """Verify every stream (or `streams`), from the start or, with `since`, from each stream's last
    verified head. Streams that pass get their verified head recorded (unless `record=False`).
    The event scan and the head scan are both in stream order and merged here; a stream with events
    but no head (events inserted behind the ledger's back) is walked too."""
    events = _event_rows(streams, since)
    heads = _head_rows(streams)
    event, head = next(events, None), next(heads, None)
    checked = count = 0
    breaks: list[ChainBreak] = []
    verified: list[AuditVerifiedHead] = []
    while event is not None or head is not None:
        if head is not None and (event is None or _key(head[0]) <= _key(event.stream)):
            stream, head_sequence, head_hash, verified_sequence, verified_hash = head
            head = next(heads, None)
        else:
            stream, head_sequence, head_hash, verified_sequence, verified_hash = event.stream, None, None, None, None
        checked += 1
        if since and verified_sequence and (head_sequence, head_hash) == (verified_sequence, verified_hash):
            while event is not None and event.stream == stream:  # not selected by the scan; defensive
                event = next(events, None)
            continue  # nothing appended since it was verified
        check = _StreamCheck(stream, verified_sequence if since else None, verified_hash if since else None)
        while event is not None and event.stream == stream:
            check.feed(event)
            count += 1
            event = next(events, None)
        found = check.finish(head_sequence, head_hash)
        if found is not None:
            breaks.append(found)
        elif record and check.last is not None and check.last != (verified_sequence, verified_hash):
            verified.append(AuditVerifiedHead(stream=stream, sequence=check.last[0], hash=check.last[1],
                                              verified_at=timezone.now()))
            if len(verified) >= settings.ARBITER_AUDIT_VERIFY_BATCH_SIZE:
                _record(verified)
                verified = []
    _record(verified)
    return VerifyResult(streams=checked, events=count, breaks=breaks)


def _record(heads: list[AuditVerifiedHead]) -> None:
    if heads:
        AuditVerifiedHead.objects.bulk_create(heads, update_conflicts=True, unique_fields=["stream"],
                                              update_fields=["sequence", "hash", "verified_at"])


def verify_stream(stream: str) -> ChainBreak | None:
    result = verify_ledger([stream], record=False)
    return result.breaks[0] if result.breaks else None


def verify_all(streams: list[str] | None = None) -> tuple[int, list[ChainBreak]]:
    result = verify_ledger(streams)
    return result.streams, result.breaks
