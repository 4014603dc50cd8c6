"""`manage.py audit_verify` walks every chain and names the first event that does not match.
To tamper, the tests switch the append-only trigger off for a moment, as an attacker with
database rights could (tests/audit/tampering.py)."""

import hashlib

import pytest
from django.core.management.base import CommandError
from django.db import DatabaseError, transaction

from audit.hashing import event_hash
from audit.models import AuditEvent
from cases import services
from tests.audit.tampering import raw_execute, triggers_disabled, verify
from tests.factories import make_case


@pytest.fixture
def ledger(analyst, supervisor, tenant):
    """Two cases with some history, and a tenant-stream event."""
    first = make_case(actor=analyst, title="First")
    second = make_case(actor=analyst, title="Second")
    for case in (first, second):
        services.case_transition(actor=analyst, case=case, transition="triage")
        services.case_transition(actor=analyst, case=case, transition="start_review")
    from audit.services import audit_record

    with transaction.atomic():
        audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:retention",
                     action="runs.retention.purged", payload={"model_calls": 2})
    return {"first": first, "second": second, "streams": 3}


def events_of(case):
    return list(AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("sequence"))


def test_clean_ledger_verifies(ledger):
    assert verify() == "OK: 3 audit streams verified.\n"


def test_empty_ledger_verifies(db):
    assert verify() == "OK: 0 audit streams verified.\n"


def test_tampered_field_is_named(ledger, supervisor):
    case = ledger["first"]
    target = events_of(case)[2]
    with triggers_disabled():
        assert raw_execute("UPDATE audit_auditevent SET actor_id = %s WHERE id = %s",
                           [f"user:{supervisor.pk}", target.pk]) == 1
    with pytest.raises(CommandError, match="1 of 3 audit streams are broken"):
        verify()
    try:
        verify()
    except CommandError as exc:
        assert exc.stderr == (f"BROKEN case:{case.pk} at sequence {target.sequence} (event id={target.pk}): "
                              f"stored hash does not match the event's content\n")


def test_triggers_are_back_after_tampering(ledger):
    target = events_of(ledger["first"])[0]
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET decision = 'denied' WHERE id = %s", [target.pk])
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw_execute("UPDATE audit_auditevent SET decision = 'allowed' WHERE id = %s", [target.pk])


def test_rehashed_forgery_breaks_the_next_link(ledger):
    """An attacker who also recomputes the forged event's hash is caught at the next event."""
    case = ledger["second"]
    events = events_of(case)
    forged = events[1]
    forged.payload = forged.payload | {"reason": "approved by the regional director"}
    new_hash = event_hash(forged)
    import json

    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET payload = " + _json_param() + ", hash = %s WHERE id = %s",
                    [json.dumps(forged.payload), new_hash, forged.pk])
    assert event_hash(AuditEvent.objects.get(pk=forged.pk)) == new_hash  # the forged row is self-consistent
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN case:{case.pk} at sequence {events[2].sequence} "
                                   f"(event id={events[2].pk}): prev_hash does not match the previous event\n")


def _json_param():
    from django.db import connection

    return "%s::jsonb" if connection.vendor == "postgresql" else "%s"


def test_deleted_last_event_is_found_through_the_stream_head(ledger):
    case = ledger["first"]
    last = events_of(case)[-1]
    with triggers_disabled():
        assert raw_execute("DELETE FROM audit_auditevent WHERE id = %s", [last.pk]) == 1
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN case:{case.pk} at sequence {last.sequence} (stream head): stream head "
                                   f"does not match the last event (events removed from the end?)\n")


def test_deleted_middle_event_is_a_sequence_gap(ledger):
    case = ledger["second"]
    events = events_of(case)
    with triggers_disabled():
        raw_execute("DELETE FROM audit_auditevent WHERE id = %s", [events[1].pk])
    with pytest.raises(CommandError) as failed:
        verify()
    assert failed.value.stderr == (f"BROKEN case:{case.pk} at sequence {events[2].sequence} "
                                   f"(event id={events[2].pk}): sequence gap: expected 2, found 3\n")


def test_every_event_of_a_stream_deleted_is_found(ledger, tenant):
    with triggers_disabled():
        raw_execute("DELETE FROM audit_auditevent WHERE stream = %s", [f"tenant:{tenant.pk}"])
    with pytest.raises(CommandError) as failed:
        verify()
    assert f"BROKEN tenant:{tenant.pk} at sequence 1 (stream head)" in failed.value.stderr


def test_only_the_first_break_of_each_stream_is_named(ledger):
    first, second = ledger["first"], ledger["second"]
    a, b = events_of(first)[1], events_of(second)[3]
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET action = 'cases.case.deleted' WHERE id IN (%s, %s)", [a.pk, b.pk])
        raw_execute("UPDATE audit_auditevent SET action = 'x' WHERE id = %s", [events_of(first)[3].pk])
    with pytest.raises(CommandError, match="2 of 3 audit streams are broken") as failed:
        verify()
    lines = failed.value.stderr.splitlines()
    assert lines == [
        f"BROKEN case:{first.pk} at sequence {a.sequence} (event id={a.pk}): stored hash does not match the "
        f"event's content",
        f"BROKEN case:{second.pk} at sequence {b.sequence} (event id={b.pk}): stored hash does not match the "
        f"event's content",
    ]


def test_stream_option_limits_the_walk(ledger):
    first, second = ledger["first"], ledger["second"]
    target = events_of(first)[0]
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET target_id = '0' WHERE id = %s", [target.pk])
    assert verify("--stream", f"case:{second.pk}") == "OK: 1 audit streams verified.\n"
    with pytest.raises(CommandError, match="1 of 2 audit streams are broken"):
        verify("--stream", f"case:{second.pk}", "--stream", f"case:{first.pk}")


def test_hash_is_not_a_plain_digest_of_the_payload(ledger):
    """The chain covers the whole event, not just its payload."""
    event = events_of(ledger["first"])[0]
    assert event.hash != hashlib.sha256(str(event.payload).encode()).hexdigest()
    assert len(event.hash) == 64
