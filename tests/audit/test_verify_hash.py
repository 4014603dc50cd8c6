"""audit_verify recomputes each hash from the row as the database returns it (audit.verify.row_hash):
it must write exactly the bytes audit.hashing.event_hash writes, or stored events stop verifying.
Checked on randomised events (unicode, control characters, nested JSON, big integers, floats,
empty values), on the text forms a database gives back for the JSON columns, and end to end."""

import json
import random
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.db import transaction

from audit.hashing import HASHED_FIELDS, event_hash
from audit.models import AuditEvent
from audit.services import audit_record
from audit.verify import BODY_KEYS, canonical_json, row_hash, verify_ledger

ALPHABET = ("abcXYZ019 _-:./@", '"\\/', "\n\r\t\b\f\x00\x01\x1f\x7f", "éßø€", "\u2028\u2029\ufeff", "日本語",
            "😀𝄞", "\ud7ff\ue000")


def _text(rng: random.Random, longest: int = 12) -> str:
    return "".join(rng.choice(rng.choice(ALPHABET)) for _ in range(rng.randint(0, longest)))


FLOATS = (0.0, -0.0, 1.5, 0.1, 1e-7, 1e16, 1e300, -2.5e-300, 1.2345678901234567e+16, 123456.789)
# PostgreSQL's jsonb keeps numbers as numeric: -0.0 comes back as 0.0 and 1e16 as the integer
# 10000000000000000. audit_record reads its payload that way before hashing (audit.services.
# _json_roundtrip), so such floats verify after the round trip through the database too.


def _json_value(rng: random.Random, depth: int = 0, floats=FLOATS):
    kinds = ["str", "int", "float", "bool", "null", "big"] + (["dict", "list"] * 2 if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return _text(rng)
    if kind == "int":
        return rng.randint(-10**6, 10**6)
    if kind == "big":
        return rng.choice([2**63, -(2**70) + 1, 10**30])
    if kind == "float":
        return rng.choice([*floats, rng.uniform(-1e6, 1e6)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "dict":
        return {_text(rng, 8): _json_value(rng, depth + 1, floats) for _ in range(rng.randint(0, 5))}
    return [_json_value(rng, depth + 1, floats) for _ in range(rng.randint(0, 5))]


def _event(rng: random.Random) -> SimpleNamespace:
    values = {name: _text(rng, 30) for name in HASHED_FIELDS}
    values["tenant_id"] = rng.choice([None, rng.randint(1, 10**9)])
    values["sequence"] = rng.randint(1, 10**12)
    values["evidence_refs"] = rng.choice([[], [_json_value(rng, 2) for _ in range(rng.randint(1, 3))]])
    values["payload"] = rng.choice([{}, {_text(rng, 8): _json_value(rng) for _ in range(rng.randint(1, 8))}])
    values["created_at"] = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(
        seconds=rng.randint(0, 10**8), microseconds=rng.choice([0, rng.randint(0, 999_999)]))
    values["key_id"] = rng.choice(["", settings.ARBITER_AUDIT_KEY_ID])  # unkeyed (before the cut-over) or keyed
    return SimpleNamespace(**values)


def _json_as_stored(value, rng: random.Random) -> str:
    """The JSON column as a database could give it back: compact or spaced (PostgreSQL's jsonb
    text), keys in any order, sometimes with surrounding whitespace."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        value = dict(items)
    separators = rng.choice([(",", ":"), (", ", ": ")])
    text = json.dumps(value, separators=separators, ensure_ascii=rng.random() < 0.5)
    return rng.choice(["", " ", "\n"]) + text + rng.choice(["", " "]) if rng.random() < 0.1 else text


def _row(event: SimpleNamespace, rng: random.Random) -> tuple:
    column = {"id": 1, "hash": "", **{name: getattr(event, name) for name in HASHED_FIELDS}}
    column["created_at"] = event.created_at.isoformat(timespec="microseconds")
    column["evidence_refs"] = _json_as_stored(event.evidence_refs, rng)
    column["payload"] = _json_as_stored(event.payload, rng)
    column["key_id"] = event.key_id
    return tuple(column[name] for name in ("id", "hash", *BODY_KEYS, "key_id"))


def test_row_hash_writes_the_same_bytes_as_event_hash_on_random_events():
    rng = random.Random(20261126)
    for _ in range(3000):
        event = _event(rng)
        assert row_hash(_row(event, rng)) == event_hash(event), event


def test_canonical_json_is_event_hashs_json_including_values_json_cannot_hold():
    """Decimals, dates and UUIDs never come back from a JSON column, but the encoder is json.dumps's
    for them too (default=str)."""
    rng = random.Random(7)
    odd = [Decimal("1.50"), Decimal("-0"), date(2026, 2, 28), datetime(2026, 1, 1, 12, tzinfo=UTC), uuid.UUID(int=5)]
    for _ in range(500):
        value = {_text(rng, 6): rng.choice([_json_value(rng), rng.choice(odd), [rng.choice(odd), _json_value(rng)]])
                 for _ in range(rng.randint(0, 6))}
        expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        assert canonical_json(value) == expected


def test_a_json_column_that_is_not_json_gives_no_hash():
    rng = random.Random(1)
    row = list(_row(_event(rng), rng))
    row[BODY_KEYS.index("payload") + 2] = '{"i": 1'
    assert row_hash(tuple(row)) is None


@pytest.mark.django_db
def test_events_written_by_the_ledger_verify_after_the_round_trip_through_the_database(tenant):
    """What the database gives back (jsonb's own text on PostgreSQL, its timestamp text) hashes to
    what audit_record stored."""
    rng = random.Random(99)
    for i in range(60):
        payload = _without_nul({_text(rng, 8): _json_value(rng, floats=FLOATS)
                                for _ in range(rng.randint(0, 6))})
        with transaction.atomic():
            audit_record(tenant_id=tenant.pk if i % 3 else None, case_id=i % 4 or None, actor_type="user",
                         actor_id=_without_nul(f"user:{_text(rng, 6)}"), action="test.random",
                         target_id=i, evidence_refs=[{"kind": "email", "id": i}] if i % 2 else [], payload=payload)
    result = verify_ledger()
    assert (result.breaks, result.events, AuditEvent.objects.count()) == ([], 60, 60)


def _without_nul(value):
    """PostgreSQL's text and jsonb cannot hold NUL; audit events never carry one."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    return value
