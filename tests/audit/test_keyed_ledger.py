"""The chain hashes are keyed (HMAC-SHA-256 under a secret outside the database): a database
administrator who rewrites an event and recomputes the chain without the key is found, and
audit_verify leaves the recorded verified head where it was. Keys rotate; the ledger written before
the keys is carried over by a keyed cut-over event per stream."""

import hashlib
import json
from types import SimpleNamespace

import pytest
from django.core.management.base import CommandError
from django.db import connection, transaction

from audit.cutover import ledger_cut_over
from audit.hashing import CUT_OVER_ACTION, HASHED_FIELDS, event_hash
from audit.models import AuditEvent, AuditStreamHead, AuditVerifiedHead
from audit.services import audit_event_values, audit_record
from cases import services
from tests.audit.tampering import raw_execute, triggers_disabled, verify
from tests.factories import make_case

KEY_0, KEY_1 = b"0" * 32, b"1" * 32


def events_of(stream):
    return list(AuditEvent.objects.filter(stream=stream).order_by("sequence"))


def verified_head(stream):
    return AuditVerifiedHead.objects.filter(stream=stream).values_list("sequence", "hash").first()


@pytest.fixture
def anchors(settings, tmp_path):
    settings.ARBITER_AUDIT_ANCHOR_DIR = tmp_path / "anchors"
    return tmp_path / "anchors"


@pytest.fixture
def case_stream(analyst, anchors):
    case = make_case(actor=analyst, title="Keyed")
    for transition in ("triage", "start_review"):
        services.case_transition(actor=analyst, case=case, transition=transition)
    return f"case:{case.pk}"


def _json_param():
    return "%s::jsonb" if connection.vendor == "postgresql" else "%s"


def rewrite(stream, *, first: int, digest, key_id=None, payload_change=None):
    """What a database administrator can do: change an event, recompute the chain from it with
    `digest` (no key), write every hash and the stream head to match."""
    events = events_of(stream)
    previous = events[first - 2].hash if first > 1 else ""
    with triggers_disabled():
        for event in events[first - 1:]:
            if event.sequence == first and payload_change:
                event.payload = event.payload | payload_change
            event.prev_hash = previous
            if key_id is not None:
                event.key_id = key_id
            body = {name: getattr(event, name) for name in HASHED_FIELDS}
            body["created_at"] = event.created_at.isoformat(timespec="microseconds")
            previous = digest(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                         default=str).encode("utf-8"))
            raw_execute(f"UPDATE audit_auditevent SET payload = {_json_param()}, prev_hash = %s, hash = %s, "
                        f"key_id = %s WHERE id = %s",
                        [json.dumps(event.payload), event.prev_hash, previous, event.key_id, event.pk])
    raw_execute("UPDATE audit_auditstreamhead SET last_hash = %s WHERE stream = %s", [previous, stream])
    return events


def plain_sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def wrong_key(body: bytes) -> str:
    import hmac

    return hmac.digest(b"a guess at the key, 32 bytes long", body, "sha256").hex()


# --- a forgery recomputed without the key --------------------------------------------------------

@pytest.mark.parametrize("digest, key_id, reason", [
    (plain_sha256, None, "stored hash does not match the event's content"),
    (wrong_key, None, "stored hash does not match the event's content"),
    (plain_sha256, "", "an unkeyed event after keyed ones (its hash needs no key to recompute)"),
], ids=["sha256", "wrong-key", "downgraded-to-unkeyed"])
def test_a_forgery_rehashed_without_the_key_is_found_and_the_verified_head_stays(case_stream, digest, key_id,
                                                                               reason):
    verify()
    recorded = verified_head(case_stream)
    last = events_of(case_stream)[-1]
    assert recorded == (last.sequence, last.hash) and last.sequence > 2
    events = rewrite(case_stream, first=2, digest=digest, key_id=key_id,
                     payload_change={"reason": "approved by the regional director"})
    # The forged chain is consistent link by link and with its head: only the key tells it apart.
    assert [e.prev_hash for e in events_of(case_stream)[1:]] == [e.hash for e in events_of(case_stream)[:-1]]
    with pytest.raises(CommandError, match="1 of 1 audit streams are broken"):
        verify()
    try:
        verify()
    except CommandError as exc:
        assert exc.stderr == f"BROKEN {case_stream} at sequence 2 (event id={events[1].pk}): {reason}\n"
    assert verified_head(case_stream) == recorded  # not moved to the forged head
    with pytest.raises(CommandError) as since:
        verify("--since")
    assert since.value.stderr == (f"BROKEN {case_stream} at sequence {last.sequence} (event id={last.pk}): the "
                                  f"last verified event changed since it was verified\n")
    assert verified_head(case_stream) == recorded


def test_a_whole_stream_rewritten_as_if_never_keyed_is_found(case_stream):
    events = rewrite(case_stream, first=1, digest=plain_sha256, key_id="", payload_change={"title": "Other"})
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN {case_stream} at sequence {events[-1].sequence} (stream head): unkeyed events that no keyed "
                                   f"cut-over event seals (written without the key)\n")
    assert AuditVerifiedHead.objects.count() == 0


def test_a_full_walk_never_overwrites_a_head_it_cannot_reproduce(case_stream):
    """Even a forgery the walk itself cannot see (a forged verified head row pointing further than
    the chain goes) leaves the recorded head alone."""
    verify()
    AuditVerifiedHead.objects.filter(stream=case_stream).update(sequence=9)
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN {case_stream} at sequence 9 (stream head): the last verified event was "
                                   f"removed (events removed from the end?)\n")
    assert verified_head(case_stream)[0] == 9


def test_events_are_keyed_with_the_current_key_and_the_step_commit_values_too(case_stream, settings):
    kid = settings.ARBITER_AUDIT_KEY_ID
    assert kid == "development-only"
    assert {e.key_id for e in events_of(case_stream)} == {kid}
    for event in events_of(case_stream):
        assert event.hash == event_hash(event) != event_hash(SimpleNamespace(**{
            **{name: getattr(event, name) for name in HASHED_FIELDS}, "created_at": event.created_at, "key_id": ""}))
    values = audit_event_values(tenant_id=None, stream="global", sequence=1, prev_hash="", actor_type="system",
                                actor_id="system:test", action="runs.step.completed")
    assert values["key_id"] == kid and values["hash"] == event_hash(SimpleNamespace(**values))


# --- rotation --------------------------------------------------------------------------------------

def _record(tenant, n):
    with transaction.atomic():
        for i in range(n):
            audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:test", action="tests.rotated",
                         payload={"i": i})


def test_events_under_the_old_and_the_new_key_both_verify(settings, tenant, anchors):
    settings.ARBITER_AUDIT_KEYS, settings.ARBITER_AUDIT_KEY_ID = {"kid0": KEY_0}, "kid0"
    _record(tenant, 2)
    settings.ARBITER_AUDIT_KEYS, settings.ARBITER_AUDIT_KEY_ID = {"kid1": KEY_1, "kid0": KEY_0}, "kid1"
    _record(tenant, 2)
    stream = f"tenant:{tenant.pk}"
    assert [e.key_id for e in events_of(stream)] == ["kid0", "kid0", "kid1", "kid1"]
    assert verify() == "OK: 1 audit streams verified.\n"
    settings.ARBITER_AUDIT_KEYS = {"kid1": KEY_1}  # the old key dropped too early
    AuditVerifiedHead.objects.all().delete()
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN {stream} at sequence 1 (event id={events_of(stream)[0].pk}): hashed "
                                   f"under audit key 'kid0', which ARBITER_AUDIT_KEYS does not hold\n")


# --- the cut-over of a ledger written before the keys ----------------------------------------------

def _unkeyed_stream(settings, tenant, n=3):
    """Events written as before the keys (no key id: plain SHA-256)."""
    settings.ARBITER_AUDIT_KEY_ID = ""
    _record(tenant, n)
    settings.ARBITER_AUDIT_KEY_ID = "development-only"
    return f"tenant:{tenant.pk}"


def test_the_cut_over_seals_the_unkeyed_start_and_everything_after_is_keyed(settings, tenant, anchors):
    stream = _unkeyed_stream(settings, tenant)
    with pytest.raises(CommandError) as failed:
        verify()
    assert "unkeyed events that no keyed cut-over event seals" in failed.value.stderr
    with transaction.atomic():
        assert ledger_cut_over(AuditEvent, AuditStreamHead) == 1
    with transaction.atomic():
        assert ledger_cut_over(AuditEvent, AuditStreamHead) == 0  # once per stream
    _record(tenant, 1)
    events = events_of(stream)
    assert [(e.key_id, e.action) for e in events] == [("", "tests.rotated")] * 3 + [
        ("development-only", CUT_OVER_ACTION), ("development-only", "tests.rotated")]
    assert events[3].prev_hash == events[2].hash
    assert events[3].payload == {"unkeyed_through_sequence": 3, "key_id": "development-only"}
    assert AuditStreamHead.objects.get(stream=stream).last_sequence == 5
    assert verify() == "OK: 1 audit streams verified.\n"


def test_the_unkeyed_start_rewritten_without_the_key_is_found_at_the_cut_over(settings, tenant, anchors):
    stream = _unkeyed_stream(settings, tenant)
    with transaction.atomic():
        ledger_cut_over(AuditEvent, AuditStreamHead)
    events = rewrite(stream, first=1, digest=plain_sha256, payload_change={"i": 99})
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN {stream} at sequence 4 (event id={events[3].pk}): stored hash does not "
                                   f"match the event's content\n")


def test_keyed_events_after_unkeyed_ones_without_the_cut_over_are_refused(settings, tenant, anchors):
    stream = _unkeyed_stream(settings, tenant, n=2)
    _record(tenant, 1)
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN {stream} at sequence 3 (event id={events_of(stream)[2].pk}): the first "
                                   f"keyed event after unkeyed ones is not the cut-over event\n")


def test_the_migration_cuts_over_with_its_historical_models(settings, tenant, anchors):
    from importlib import import_module

    from django.db.migrations.loader import MigrationLoader

    stream = _unkeyed_stream(settings, tenant, n=2)
    migration = import_module("audit.migrations.0005_audit_event_key_id")
    apps = MigrationLoader(connection).project_state(("audit", "0005_audit_event_key_id")).apps
    with transaction.atomic():
        migration.cut_over(apps, None)
    assert [e.action for e in events_of(stream)] == ["tests.rotated", "tests.rotated", CUT_OVER_ACTION]
    assert verify() == "OK: 1 audit streams verified.\n"
