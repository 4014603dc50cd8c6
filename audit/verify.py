"""Walk the audit hash chains and report the first event of each stream that does not match.

Streaming at ledger scale (ADR 0010): one scan, ordered by (stream, sequence), returns every stream's
head row followed by its events, read in batches through a server-side cursor on PostgreSQL
(PostgreSQL merges the event index with the heads, so no sort and no round trip per stream) —
constant memory. `since=True` verifies incrementally: each changed stream resumes from its last
verified head (AuditVerifiedHead: sequence and hash of the last event a verification passed,
recorded when it passes), so a nightly verification costs what was appended since. What was
verified before is trusted then; a full verification (the default) re-checks everything.

Speed (ADR 0010, "audit_verify speed"): the hash is recomputed from the row as the database returns
it — the JSON columns as text, the timestamp as the exact `isoformat` text — by `row_hash`, which
writes the same bytes as `audit.hashing.event_hash` without building an event, a dict per row or a
json.dumps call (tests/audit/test_verify_hash.py checks the equality on randomised events).

Keys (ADR 0017): a hash is an HMAC under the key its row names (key_id), or, for the events written
before the ledger was keyed, a plain SHA-256 that must be sealed by the stream's keyed cut-over
event. A verification never records a verified head it did not reproduce: the event at a stream's
recorded verified head must still be there with the same hash, and the event each stream's latest
signed anchor (outside the database, audit.anchors) names too; otherwise the stream is reported
broken and its recorded head stays where it was."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from json.decoder import JSONDecoder
from json.encoder import c_make_encoder, encode_basestring

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from audit.anchors import Anchor, AnchorError, anchor_latest
from audit.hashing import CUT_OVER_ACTION, HASHED_FIELDS, chain_digest
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
    anchor: Anchor | None = None
    anchor_error: str | None = None  # the latest anchor cannot be trusted (AnchorError)


# --- the hash, from a row --------------------------------------------------------------------------

# event_hash writes json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
# default=str): the body's keys in sorted order, each value as that encoder writes it. The scan
# selects the values in that order, so a row is: id, hash, then the body's values, then the key id.
BODY_KEYS = tuple(sorted((*HASHED_FIELDS, "created_at")))
_COLUMNS = ("id", "hash", *BODY_KEYS, "key_id")
(ACTION, ACTOR_ID, ACTOR_TYPE, CREATED_AT, DECISION, EVIDENCE_REFS, PAYLOAD, POLICY_VERSION, PREV_HASH, RUN_ID,
 SEQUENCE, STREAM, TARGET_ID, TARGET_TYPE, TENANT_ID) = (_COLUMNS.index(name) for name in BODY_KEYS)
ID, HASH, KEY_ID = 0, 1, len(_COLUMNS) - 1
_BODY = "{" + ",".join(f'"{name}":%s' for name in BODY_KEYS) + "}"

# The encoder json.dumps builds for those arguments (JSONEncoder.iterencode with _one_shot), made
# once. markers=None only drops the check for circular references, which JSON decoded from the
# database cannot have; the text written is the same.
if c_make_encoder is not None:
    _c_encoder = c_make_encoder(None, str, encode_basestring, None, ":", ",", True, False, True)

    def canonical_json(value) -> str:
        return "".join(_c_encoder(value, 0))
else:  # pragma: no cover - CPython always has the C accelerator
    def canonical_json(value) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)

_scan_json = JSONDecoder().scan_once  # what json.loads runs, without its wrappers


def _json_text(text: str) -> str:
    """The canonical text of the JSON document `text` (as json.loads then event_hash's dumps)."""
    if text == "[]" or text == "{}":  # most events' evidence_refs: already canonical
        return text
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        value = json.loads(text)  # surrounding whitespace, or not JSON at all (ValueError)
    return canonical_json(value)


def row_hash(row, keys: dict[str, bytes] | None = None) -> str | None:
    """The chain hash of the event in `row` (laid out as the scan selects it: the string columns as
    str, sequence and tenant_id as int or None, created_at as its isoformat text, evidence_refs and
    payload as JSON text) — the same digest event_hash gives for the event, keyed by the row's
    key_id from `keys` (the settings' ring if None). None if a JSON column holds no JSON (only
    possible where the database does not check it: SQLite) or the key id is not in the ring."""
    try:
        evidence_refs, payload = _json_text(row[EVIDENCE_REFS]), _json_text(row[PAYLOAD])
    except ValueError:
        return None
    sequence, tenant_id = row[SEQUENCE], row[TENANT_ID]
    body = _BODY % (
        encode_basestring(row[ACTION]), encode_basestring(row[ACTOR_ID]), encode_basestring(row[ACTOR_TYPE]),
        encode_basestring(row[CREATED_AT]), encode_basestring(row[DECISION]), evidence_refs, payload,
        encode_basestring(row[POLICY_VERSION]), encode_basestring(row[PREV_HASH]), encode_basestring(row[RUN_ID]),
        sequence if type(sequence) is int else canonical_json(sequence),
        encode_basestring(row[STREAM]), encode_basestring(row[TARGET_ID]), encode_basestring(row[TARGET_TYPE]),
        tenant_id if type(tenant_id) is int else canonical_json(tenant_id),
    )
    return chain_digest(body.encode("utf-8"), row[KEY_ID] or "", keys)


# --- the scan --------------------------------------------------------------------------------------

# A stream's head row comes first in its stream (sequence -1) and reuses four columns:
# id = verified sequence, hash = the head's last hash, prev_hash = verified hash,
# tenant_id = the head's last sequence. Either side may be NULL (no head / never verified).
_HEAD_SEQUENCE = -1
_HEAD_COLUMNS = {"id": "c.verified_sequence", "hash": "CAST(c.last_hash AS text)",
                 "prev_hash": "CAST(c.verified_hash AS text)",
                 "tenant_id": "c.last_sequence", "sequence": f"CAST({_HEAD_SEQUENCE} AS bigint)", "stream": "c.stream"}
# Every other column is text on both sides of the UNION ALL: PostgreSQL merges its two ordered
# inputs (Merge Append over the (stream, sequence) index) only when the types match exactly.
_PG_EVENT_COLUMNS = {
    "created_at": """to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')""",
}
_KEEP_TYPE = ("id", "sequence", "stream", "tenant_id")


def _streams_sql(streams: list[str] | None) -> tuple[str, list]:
    """Every stream (of `streams`) with a head or a verified head: (stream, last_sequence,
    last_hash, verified_sequence, verified_hash)."""
    heads, verified, params = "audit_auditstreamhead", "audit_auditverifiedhead", []
    if streams is not None:
        among = f"WHERE stream IN ({', '.join(['%s'] * len(streams))})"
        heads, verified = f"(SELECT * FROM {heads} {among})", f"(SELECT * FROM {verified} {among})"
        params = [*streams, *streams]
    return ("SELECT COALESCE(h.stream, v.stream) AS stream, h.last_sequence, h.last_hash, "
            "v.sequence AS verified_sequence, v.hash AS verified_hash "
            f"FROM {heads} h FULL JOIN {verified} v ON v.stream = h.stream"), params


def _scan_sql(streams: list[str] | None, since: bool) -> tuple[str, list]:
    postgres = connection.vendor == "postgresql"
    if postgres:
        events = ", ".join(_PG_EVENT_COLUMNS.get(name, f"e.{name}" if name in _KEEP_TYPE else f"e.{name}::text")
                           for name in _COLUMNS)
        heads = ", ".join(_HEAD_COLUMNS.get(name, "NULL::text") for name in _COLUMNS)
    else:
        events = ", ".join(f"e.{name}" for name in _COLUMNS)
        heads = ", ".join(_HEAD_COLUMNS.get(name, "NULL") for name in _COLUMNS)
    chosen, params = _streams_sql(streams)
    if since:
        # Driven by the streams that changed since they were verified, each read from its verified
        # event on by an index range scan: the cost is what was appended. (OFFSET 0 keeps
        # PostgreSQL from flattening the lateral subquery into a hash join over the whole ledger
        # when it overestimates how many streams changed.)
        chosen += (" WHERE COALESCE(h.last_sequence, -1) <> COALESCE(v.sequence, -1) "
                   "OR COALESCE(h.last_hash, '') <> COALESCE(v.hash, '')")
        if postgres:
            source = ("c CROSS JOIN LATERAL (SELECT * FROM audit_auditevent x WHERE x.stream = c.stream "
                      "AND x.sequence >= COALESCE(c.verified_sequence, 1) OFFSET 0) e")
        else:
            source = "c JOIN audit_auditevent e ON e.stream = c.stream AND e.sequence >= COALESCE(c.verified_sequence, 1)"
        sql = (f"WITH c AS {'MATERIALIZED ' if postgres else ''}({chosen}) "
               f"SELECT {events} FROM {source} UNION ALL SELECT {heads} FROM c")
    else:
        event_where = ""
        if streams is not None:
            event_where = f"WHERE e.stream IN ({', '.join(['%s'] * len(streams))})"
            params = [*streams, *params]
        sql = (f"SELECT {events} FROM audit_auditevent e {event_where} "
               f"UNION ALL SELECT {heads} FROM ({chosen}) c")
    return f"{sql} ORDER BY {STREAM + 1}, {SEQUENCE + 1}", params


def _created_at_text():
    """SQLite returns the timestamp as stored: convert it like the ORM, then write it as event_hash
    does."""
    field = AuditEvent._meta.get_field("created_at")
    column = field.get_col(AuditEvent._meta.db_table)
    converters = connection.ops.get_db_converters(column) + field.get_db_converters(connection)

    def convert(value):
        for function in converters:
            value = function(value, column, connection)
        return value.isoformat(timespec="microseconds")

    return convert


def _rows(streams: list[str] | None, since: bool):
    """The scan's rows, in batches of ARBITER_AUDIT_VERIFY_BATCH_SIZE."""
    sql, params = _scan_sql(streams, since)
    batch = settings.ARBITER_AUDIT_VERIFY_BATCH_SIZE
    if connection.vendor == "postgresql":
        with transaction.atomic():  # a server-side cursor lives in a transaction
            with connection.cursor() as cursor:
                # No JIT for the scan: the planner cannot know how few streams moved since they
                # were verified, estimates the --since scan at a third of the ledger, and JIT then
                # compiled for ~0.2 s (and ~0.8 s under load) to read a thousand rows. SET LOCAL
                # would outlive our savepoint in a caller's transaction: the value is put back.
                cursor.execute("SELECT current_setting('jit'), set_config('jit', 'off', true)")
                jit = cursor.fetchone()[0]
            cursor = connection.chunked_cursor()
            try:
                cursor.execute(sql, params)
                yield from _read_ahead(cursor, batch)
            finally:
                cursor.close()
                with connection.cursor() as restore:
                    restore.execute("SELECT set_config('jit', %s, true)", [jit])
        return
    # SQLite: a plain read in chunks, no transaction held open (the web page's chain status runs
    # beside a live server thread sharing the connection in the browser tests).
    convert = _created_at_text()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(batch):
            yield [row if row[SEQUENCE] == _HEAD_SEQUENCE else
                   (*row[:CREATED_AT], convert(row[CREATED_AT]), *row[CREATED_AT + 1:]) for row in rows]


def _read_ahead(cursor, batch: int):
    """cursor.fetchmany(batch) until it is empty, the next batch fetched by a helper thread while the
    caller hashes this one: PostgreSQL produces rows while Python checks them (the thread waits on
    the socket without the GIL). psycopg serialises the connection's use, so the caller may run
    other statements (recording verified heads) meanwhile."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-verify-fetch") as pool:
        pending = pool.submit(cursor.fetchmany, batch)
        while rows := pending.result():
            pending = pool.submit(cursor.fetchmany, batch)
            yield rows
    # Leaving the pool (also when the caller stops early) waits for a fetch still in flight, so the
    # cursor is idle when the caller closes it.


def _count_streams(streams: list[str] | None) -> int:
    sql, params = _streams_sql(streams)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({sql}) c", params)
        return cursor.fetchone()[0]


# --- the walk --------------------------------------------------------------------------------------

class _Stream:
    """One stream's walk: what the next event must look like, and how the stream ended."""

    __slots__ = ("name", "head_sequence", "head_hash", "verified_sequence", "verified_hash", "resume", "keys",
                 "expected_sequence", "expected_prev", "broken", "walked", "keyed", "unkeyed")

    def __init__(self, name: str, head_sequence, head_hash, verified_sequence, verified_hash, *, resume: bool,
                 keys: dict[str, bytes]):
        self.name = name
        self.head_sequence, self.head_hash = head_sequence, head_hash
        self.verified_sequence, self.verified_hash = verified_sequence, verified_hash
        # Resuming (since): the verified event itself is read again and must be unchanged.
        self.resume = resume and bool(verified_sequence)
        self.keys = keys
        self.expected_sequence = verified_sequence if self.resume else 1
        self.expected_prev = None if self.resume else ""
        self.broken: ChainBreak | None = None
        self.walked = 0
        self.keyed = self.unkeyed = False  # seen a keyed / an unkeyed event

    def feed(self, row) -> None:
        sequence, key_id = row[SEQUENCE], row[KEY_ID]
        if sequence != self.expected_sequence:
            reason = f"sequence gap: expected {self.expected_sequence}, found {sequence}"
        elif self.expected_prev is not None and row[PREV_HASH] != self.expected_prev:
            reason = "prev_hash does not match the previous event"
        elif sequence == self.verified_sequence and row[HASH] != self.verified_hash:
            # A full walk checks it too: a head it cannot reproduce is never overwritten.
            reason = "the last verified event changed since it was verified"
        elif key_id and key_id not in self.keys:
            reason = f"hashed under audit key {key_id!r}, which ARBITER_AUDIT_KEYS does not hold"
        elif not key_id and self.keyed:
            reason = "an unkeyed event after keyed ones (its hash needs no key to recompute)"
        elif key_id and self.unkeyed and not self.keyed and row[ACTION] != CUT_OVER_ACTION:
            reason = "the first keyed event after unkeyed ones is not the cut-over event"
        elif row_hash(row, self.keys) != row[HASH]:
            reason = "stored hash does not match the event's content"
        else:
            if key_id:
                self.keyed = True
            else:
                self.unkeyed = True
            self.expected_prev = row[HASH]
            self.expected_sequence += 1
            self.walked += 1
            return
        self.broken = ChainBreak(self.name, row[ID], sequence, reason)

    def last(self) -> tuple[int, str] | None:
        return (self.expected_sequence - 1, self.expected_prev) if self.walked else None

    def finish(self) -> ChainBreak | None:
        if self.broken is not None:
            return self.broken
        if self.resume and not self.walked:
            return ChainBreak(self.name, None, self.verified_sequence,
                              "the last verified event was removed (events removed from the end?)")
        last_sequence, last_hash = self.last() or (0, "")
        if self.head_sequence is not None and (self.head_sequence != last_sequence or self.head_hash != last_hash):
            return ChainBreak(self.name, None, self.head_sequence,
                              "stream head does not match the last event (events removed from the end?)")
        if self.verified_sequence and last_sequence < self.verified_sequence:
            return ChainBreak(self.name, None, self.verified_sequence,
                              "the last verified event was removed (events removed from the end?)")
        if self.unkeyed and not self.keyed:
            return ChainBreak(self.name, None, last_sequence,
                              "unkeyed events that no keyed cut-over event seals (written without the key)")
        return None


def verify_ledger(streams: list[str] | None = None, *, since: bool = False, record: bool = True,
                  anchors: bool = True) -> VerifyResult:
    """Verify every stream (or `streams`), from the start or, with `since`, from each stream's last
    verified head, and (with `anchors`) against the latest signed anchor. Streams that pass get
    their verified head recorded (unless `record=False`); a broken stream's recorded head is left
    as it was. A stream with events but no head (events inserted behind the ledger's back) is
    walked too by a full verification; `since` walks only the streams whose head moved since it
    was verified (the anchor is checked for every stream it names either way)."""
    keys = settings.ARBITER_AUDIT_KEYS
    anchor, anchor_error, anchor_breaks = _check_anchor(streams) if anchors else (None, None, {})
    walked = count = 0
    breaks: list[ChainBreak] = []
    verified: list[AuditVerifiedHead] = []
    # PostgreSQL records the verified heads as the scan goes (its cursor reads a snapshot); SQLite
    # once the scan is done, not into a table its open read is scanning.
    flush_at = settings.ARBITER_AUDIT_VERIFY_BATCH_SIZE if connection.vendor == "postgresql" else None

    def close(stream: _Stream | None) -> None:
        nonlocal verified
        if stream is None:
            return
        found = stream.finish() or anchor_breaks.pop(stream.name, None)
        if found is not None:
            breaks.append(found)
            return
        last = stream.last()
        if record and last is not None and last != (stream.verified_sequence, stream.verified_hash):
            verified.append(AuditVerifiedHead(stream=stream.name, sequence=last[0], hash=last[1],
                                              verified_at=timezone.now()))
            if flush_at and len(verified) >= flush_at:
                _record(verified)
                verified = []

    current: _Stream | None = None
    headless = 0
    for rows in _rows(streams, since):
        for row in rows:
            if row[SEQUENCE] == _HEAD_SEQUENCE:
                close(current)
                walked += 1
                current = _Stream(row[STREAM], row[TENANT_ID], row[HASH], row[ID], row[PREV_HASH], resume=since,
                                  keys=keys)
                continue
            if current is None or row[STREAM] != current.name:
                close(current)  # events of a stream without a head row
                walked += 1
                headless += 1
                current = _Stream(row[STREAM], None, None, None, None, resume=False, keys=keys)
            count += 1
            if current.broken is None:
                current.feed(row)
    close(current)
    _record(verified)
    breaks.extend(anchor_breaks.values())  # anchored streams the walk did not reach
    if since:  # the streams not walked were verified before and have not moved since
        walked = _count_streams(streams) + headless
    return VerifyResult(streams=walked, events=count, breaks=breaks, anchor=anchor, anchor_error=anchor_error)


def _check_anchor(streams: list[str] | None) -> tuple[Anchor | None, str | None, dict[str, ChainBreak]]:
    """The latest anchor, why it cannot be trusted (or None), and a break for each stream (of
    `streams`) whose anchored event is gone or changed."""
    try:
        anchor = anchor_latest()
    except AnchorError as exc:
        return None, str(exc), {}
    if anchor is None:
        return None, None, {}
    wanted = anchor.heads if streams is None else {s: anchor.heads[s] for s in streams if s in anchor.heads}
    breaks: dict[str, ChainBreak] = {}
    names = list(wanted)
    for start in range(0, len(names), _ANCHOR_BATCH):
        batch = names[start:start + _ANCHOR_BATCH]
        found = {}
        # Narrowed by stream and by the anchored sequences: about one event per stream is read.
        rows = (AuditEvent.objects.filter(stream__in=batch, sequence__in={wanted[name][0] for name in batch})
                .values_list("id", "stream", "sequence", "hash"))
        for event_id, stream, sequence, digest in rows:
            if wanted[stream][0] == sequence:
                found[stream] = (event_id, digest)
        for name in batch:
            sequence, digest = wanted[name]
            if name not in found:
                breaks[name] = ChainBreak(name, None, sequence, f"the event signed into the anchor of "
                                                                f"{anchor.anchored_at} is gone (events removed?)")
            elif found[name][1] != digest:
                breaks[name] = ChainBreak(name, found[name][0], sequence, f"the event differs from the one signed "
                                                                          f"into the anchor of {anchor.anchored_at}")
    return anchor, None, breaks


_ANCHOR_BATCH = 400


def _record(heads: list[AuditVerifiedHead]) -> None:
    if heads:
        AuditVerifiedHead.objects.bulk_create(heads, update_conflicts=True, unique_fields=["stream"],
                                              update_fields=["sequence", "hash", "verified_at"])


def verify_stream(stream: str) -> ChainBreak | None:
    """One stream's first break, without the anchor (read per page view: no anchor file read)."""
    result = verify_ledger([stream], record=False, anchors=False)
    return result.breaks[0] if result.breaks else None


def verify_stream_and_record(stream: str) -> tuple[ChainBreak | None, AuditVerifiedHead | None]:
    """One stream verified in full now and recorded (a person's "Verify now"): every event from
    the first, and the latest signed anchor. When it is intact its verified head is recorded with
    the time of this verification (even when no event was appended since the last one); a broken
    stream keeps its recorded head. Returns the first break (or None) and the verified head."""
    result = verify_ledger([stream])
    broken = result.breaks[0] if result.breaks else None
    if broken is None and result.anchor_error:
        broken = ChainBreak(stream, None, 0, f"the latest signed anchor cannot be trusted: {result.anchor_error}")
    if broken is None:
        AuditVerifiedHead.objects.filter(stream=stream).update(verified_at=timezone.now())
    return broken, AuditVerifiedHead.objects.filter(stream=stream).first()


def verify_all(streams: list[str] | None = None) -> tuple[int, list[ChainBreak]]:
    result = verify_ledger(streams)
    if result.anchor_error:
        return result.streams, [*result.breaks, ChainBreak("anchor", None, 0, result.anchor_error)]
    return result.streams, result.breaks
