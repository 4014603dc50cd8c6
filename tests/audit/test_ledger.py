"""The append-only, hash-chained audit ledger. Runs on whichever database
DATABASE_URL names; the suite is run on SQLite and on PostgreSQL."""

import pytest
from django.db import DatabaseError, connection, transaction

from audit.hashing import event_hash
from audit.models import AppendOnlyError, AuditEvent, AuditStreamHead
from audit.services import audit_record, stream_for
from cases import services
from tests.audit.tampering import raw_execute
from tests.factories import make_case


@pytest.fixture
def event(case):
    return AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("sequence").first()


def _row(pk):
    return AuditEvent.objects.filter(pk=pk).values("action", "actor_id", "hash", "payload").get()


# --- the database refuses -------------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "UPDATE audit_auditevent SET actor_id = 'user:999' WHERE id = %s",
    "UPDATE audit_auditevent SET hash = 'x', prev_hash = 'y' WHERE id = %s",
    "DELETE FROM audit_auditevent WHERE id = %s",
])
def test_raw_sql_update_and_delete_are_refused_by_the_database(sql, event):
    before = _row(event.pk)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw_execute(sql, [event.pk])
    assert _row(event.pk) == before


def test_raw_sql_bulk_delete_is_refused(case):
    count = AuditEvent.objects.count()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        raw_execute("DELETE FROM audit_auditevent")
    assert AuditEvent.objects.count() == count > 0


def test_the_refusal_comes_from_a_trigger(db):
    if connection.vendor == "sqlite":
        names = raw_names("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit_auditevent'")
        assert names == {"audit_auditevent_no_update", "audit_auditevent_no_delete"}
    else:
        names = raw_names("SELECT tgname FROM pg_trigger WHERE tgrelid = 'audit_auditevent'::regclass "
                          "AND NOT tgisinternal AND tgenabled = 'O'")
        assert names == {"audit_auditevent_no_update_delete"}


def raw_names(sql):
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return {row[0] for row in cursor.fetchall()}


def test_raw_sql_insert_still_works(case):
    """Append-only, not read-only: the triggers only refuse changes to existing rows."""
    event = AuditEvent.objects.filter(stream=f"case:{case.pk}").first()
    raw_execute(
        "INSERT INTO audit_auditevent (tenant_id, stream, sequence, actor_type, actor_id, action, target_type, "
        "target_id, run_id, policy_version, decision, evidence_refs, payload, created_at, prev_hash, hash) "
        "SELECT tenant_id, 'scratch', 1, actor_type, actor_id, action, target_type, target_id, run_id, "
        "policy_version, decision, evidence_refs, payload, created_at, '', hash FROM audit_auditevent WHERE id = %s",
        [event.pk])
    assert AuditEvent.objects.filter(stream="scratch").count() == 1


# --- the ORM refuses -----------------------------------------------------------------------------

def test_orm_save_of_an_existing_event_is_refused(event):
    before = _row(event.pk)
    event.actor_id = "user:999"
    with pytest.raises(AppendOnlyError, match="cannot be updated"):
        event.save()
    assert _row(event.pk) == before


def test_orm_delete_is_refused(event):
    with pytest.raises(AppendOnlyError, match="cannot be deleted"):
        event.delete()
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_queryset_update_and_delete_are_refused(event):
    count = AuditEvent.objects.count()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(actor_id="user:999")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    event.actor_id = "user:999"
    # bulk_update opens atomic(savepoint=False): give it a savepoint so this test can go on querying.
    with pytest.raises(AppendOnlyError), transaction.atomic():
        AuditEvent.objects.bulk_update([event], ["actor_id"])
    assert AuditEvent.objects.count() == count
    assert AuditEvent.objects.get(pk=event.pk).actor_id != "user:999"


# --- writing ------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_audit_record_refuses_to_run_outside_a_transaction(tenant):
    count = AuditEvent.objects.count()
    with pytest.raises(RuntimeError, match="must be called inside the transaction of the change"):
        audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:test", action="tests.thing.done")
    assert AuditEvent.objects.count() == count
    assert not AuditStreamHead.objects.filter(stream=f"tenant:{tenant.pk}").exists()


@pytest.mark.django_db(transaction=True)
def test_audit_record_rolls_back_with_the_change(tenant):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:test", action="tests.thing.done")
        1 / 0  # noqa: B018 — the change it records fails after the event was written
    assert not AuditEvent.objects.filter(action="tests.thing.done").exists()


def test_each_case_has_its_own_chain(analyst, tenant):
    first = make_case(actor=analyst, title="First")
    second = make_case(actor=analyst, title="Second")
    services.case_transition(actor=analyst, case=first, transition="triage")
    services.case_transition(actor=analyst, case=second, transition="triage")
    services.case_transition(actor=analyst, case=first, transition="start_review")
    for case in (first, second):
        events = list(AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("sequence"))
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        assert events[0].prev_hash == ""
        for previous, current in zip(events, events[1:], strict=False):
            assert current.prev_hash == previous.hash
        for e in events:
            assert e.hash == event_hash(e)
            assert e.tenant_id == tenant.pk
        head = AuditStreamHead.objects.get(stream=f"case:{case.pk}")
        assert (head.last_sequence, head.last_hash) == (events[-1].sequence, events[-1].hash)
    first_actions = list(AuditEvent.objects.filter(stream=f"case:{first.pk}").values_list("action", flat=True))
    assert first_actions.count("cases.case.transitioned") == 2
    second_actions = list(AuditEvent.objects.filter(stream=f"case:{second.pk}").values_list("action", flat=True))
    assert second_actions.count("cases.case.transitioned") == 1


def test_events_about_no_case_go_to_the_tenant_stream(tenant, other_tenant, case):
    assert stream_for(tenant_id=tenant.pk) == f"tenant:{tenant.pk}"
    assert stream_for(tenant_id=tenant.pk, case_id=case.pk) == f"case:{case.pk}"
    assert stream_for(tenant_id=None) == "global"
    with transaction.atomic():
        one = audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:retention",
                           action="runs.retention.purged", payload={"checkpoints": 3})
        two = audit_record(tenant_id=tenant.pk, actor_type="user", actor_id="user:1", action="accounts.user.logged_in")
        elsewhere = audit_record(tenant_id=other_tenant.pk, actor_type="system", actor_id="system:retention",
                                 action="runs.retention.purged")
    assert (one.stream, one.sequence, one.prev_hash) == (f"tenant:{tenant.pk}", 1, "")
    assert (two.stream, two.sequence, two.prev_hash) == (f"tenant:{tenant.pk}", 2, one.hash)
    assert (elsewhere.stream, elsewhere.sequence, elsewhere.prev_hash) == (f"tenant:{other_tenant.pk}", 1, "")
    # the case stream was not touched
    assert AuditStreamHead.objects.get(stream=f"case:{case.pk}").last_sequence == AuditEvent.objects.filter(
        stream=f"case:{case.pk}").count()


def test_stored_event_hashes_what_the_database_returns(tenant):
    with transaction.atomic():
        recorded = audit_record(tenant_id=tenant.pk, actor_type="system", actor_id="system:test",
                                action="tests.thing.done", evidence_refs=[3, 1],
                                payload={"b": 1, "a": [1, 2], "when": __import__("datetime").date(2026, 1, 2),
                                         "text": "naïve — ünïcode"})
    stored = AuditEvent.objects.get(pk=recorded.pk)
    assert stored.payload == {"b": 1, "a": [1, 2], "when": "2026-01-02", "text": "naïve — ünïcode"}
    assert event_hash(stored) == stored.hash == recorded.hash


def test_changing_any_hashed_field_changes_the_hash(event):
    original = event.hash
    for field, value in [("actor_id", "user:999"), ("action", "x"), ("decision", "denied"), ("payload", {"x": 1}),
                         ("prev_hash", "0" * 64), ("sequence", 99), ("evidence_refs", [42])]:
        fresh = AuditEvent.objects.get(pk=event.pk)
        setattr(fresh, field, value)
        assert event_hash(fresh) != original, field
