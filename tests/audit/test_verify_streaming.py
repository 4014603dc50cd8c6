"""audit_verify at ledger scale (ADR 0010): one streamed scan in batches still finds a tampered and a
removed event; --since resumes each stream from its last verified head and reads only what was
appended, yet notices a change to the event it resumes from."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction

from audit.models import AuditEvent, AuditVerifiedHead
from audit.services import audit_record
from audit.verify import verify_ledger
from tests.audit.tampering import raw_execute, triggers_disabled

pytestmark = pytest.mark.django_db


def _append(tenant, case_id, n, action="test.appended"):
    for i in range(n):
        with transaction.atomic():
            audit_record(tenant_id=tenant.pk, case_id=case_id, actor_type="system", actor_id="system:test",
                         action=action, payload={"i": i})


@pytest.fixture
def ledger(tenant, settings):
    settings.ARBITER_AUDIT_VERIFY_BATCH_SIZE = 3  # many batches, streams cut across batch boundaries
    for case_id in (101, 102, 103, 104):
        _append(tenant, case_id, 7)
    return tenant


def _events(stream):
    return list(AuditEvent.objects.filter(stream=stream).order_by("sequence"))


def test_a_clean_ledger_streams_in_batches_and_records_the_verified_heads(ledger):
    result = verify_ledger()
    assert (result.streams, result.events, result.breaks) == (4, 28, [])
    heads = dict(AuditVerifiedHead.objects.values_list("stream", "sequence"))
    assert heads == {f"case:{c}": 7 for c in (101, 102, 103, 104)}


def test_streaming_finds_a_tampered_and_a_removed_event(ledger):
    tampered, removed = _events("case:102")[3], _events("case:104")[2]
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET actor_id = 'user:1' WHERE id = %s", [tampered.pk])
        raw_execute("DELETE FROM audit_auditevent WHERE id = %s", [removed.pk])
    result = verify_ledger()
    assert [(b.stream, b.event_id, b.sequence, b.reason) for b in result.breaks] == [
        ("case:102", tampered.pk, 4, "stored hash does not match the event's content"),
        ("case:104", _events("case:104")[2].pk, 4, "sequence gap: expected 3, found 4"),
    ]
    # Broken streams keep no verified head; intact ones do.
    assert set(AuditVerifiedHead.objects.values_list("stream", flat=True)) == {"case:101", "case:103"}


def test_a_removed_last_event_and_a_stream_without_head_are_found(ledger):
    last = _events("case:101")[-1]
    with triggers_disabled():
        raw_execute("DELETE FROM audit_auditevent WHERE id = %s", [last.pk])
        raw_execute("DELETE FROM audit_auditstreamhead WHERE stream = %s", ["case:103"])
        raw_execute("UPDATE audit_auditevent SET payload = %s WHERE id = %s",
                    ['{"i": 99}', _events("case:103")[5].pk])
    result = verify_ledger()
    assert [(b.stream, b.sequence, b.reason.split(":")[0]) for b in result.breaks] == [
        ("case:101", 7, "stream head does not match the last event (events removed from the end?)"),
        ("case:103", 6, "stored hash does not match the event's content"),
    ]


def test_since_reads_only_what_was_appended(ledger):
    assert verify_ledger().events == 28
    _append(ledger, 102, 2)
    _append(ledger, 105, 3)  # a new stream
    result = verify_ledger(since=True)
    # Stream 102 re-reads its verified event (#7) and the two new ones; 105 is read whole.
    assert (result.breaks, result.events) == ([], 3 + 3)
    assert AuditVerifiedHead.objects.get(stream="case:102").sequence == 9
    assert verify_ledger(since=True).events == 0  # nothing appended since


def test_since_finds_tampering_in_what_was_appended_and_a_changed_resume_point(ledger):
    verify_ledger()
    _append(ledger, 101, 2)
    _append(ledger, 103, 2)
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET action = 'forged' WHERE id = %s", [_events("case:101")[8].pk])
        raw_execute("UPDATE audit_auditevent SET hash = %s WHERE id = %s", ["0" * 64, _events("case:103")[6].pk])
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="2 of 4 audit streams are broken"):
        call_command("audit_verify", "--since", stdout=out, stderr=err)
    assert err.getvalue().splitlines() == [
        f"BROKEN case:101 at sequence 9 (event id={_events('case:101')[8].pk}): stored hash does not match the "
        f"event's content",
        f"BROKEN case:103 at sequence 7 (event id={_events('case:103')[6].pk}): the last verified event changed "
        f"since it was verified",
    ]


def test_the_command_reports_counts(ledger):
    out = StringIO()
    call_command("audit_verify", "--verbosity", "2", stdout=out)
    assert out.getvalue().startswith("OK: 4 audit streams verified.\n28 events read in ")


def test_streaming_finds_a_reordered_event(ledger):
    """Two events swapped (each given the other's sequence): the chain breaks where the first of
    them now stands."""
    events = _events("case:103")
    third, fourth = events[2], events[3]
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET sequence = 1000 WHERE id = %s", [third.pk])
        raw_execute("UPDATE audit_auditevent SET sequence = 3 WHERE id = %s", [fourth.pk])
        raw_execute("UPDATE audit_auditevent SET sequence = 4 WHERE id = %s", [third.pk])
    result = verify_ledger()
    assert [(b.stream, b.event_id, b.sequence, b.reason) for b in result.breaks] == [
        ("case:103", fourth.pk, 3, "prev_hash does not match the previous event"),
    ]
    assert not AuditVerifiedHead.objects.filter(stream="case:103").exists()


@pytest.mark.parametrize("change", ["last_hash = %s", "last_sequence = last_sequence + 1, last_hash = %s",
                                    "last_sequence = last_sequence - 1, last_hash = %s"])
def test_streaming_finds_a_wrong_stored_head(ledger, change):
    events = _events("case:102")
    forged = {"last_hash = %s": "f" * 64}.get(change, events[-1].hash if "+" in change else events[-2].hash)
    with triggers_disabled():
        raw_execute(f"UPDATE audit_auditstreamhead SET {change} WHERE stream = %s", [forged, "case:102"])
    result = verify_ledger()
    assert [(b.stream, b.event_id, b.reason) for b in result.breaks] == [
        ("case:102", None, "stream head does not match the last event (events removed from the end?)"),
    ]


def test_the_walk_costs_the_same_statements_for_any_number_of_streams(ledger):
    """No round trip per stream: the scan is one statement (fetched in batches), whatever the
    number of streams and events (on PostgreSQL inside a savepoint, with JIT off for it and back)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as four_streams:
        assert verify_ledger(record=False).streams == 4
    for case_id in range(200, 212):
        _append(ledger, case_id, 2)
    with CaptureQueriesContext(connection) as sixteen_streams:
        assert verify_ledger(record=False).streams == 16
    assert len(sixteen_streams.captured_queries) == len(four_streams.captured_queries) <= 5


def test_since_with_streams_reads_only_those_that_moved(ledger):
    verify_ledger()
    _append(ledger, 101, 2)
    _append(ledger, 102, 2)
    result = verify_ledger(["case:101", "case:103"], since=True)
    assert (result.streams, result.events, result.breaks) == (2, 3, [])  # 101 from its verified #7; 103 unmoved
    assert dict(AuditVerifiedHead.objects.values_list("stream", "sequence")) == {
        "case:101": 9, "case:102": 7, "case:103": 7, "case:104": 7}


def test_a_scan_stopped_early_leaves_the_connection_usable(ledger):
    """On PostgreSQL a helper thread may be fetching the next batch when the walk stops (an error
    while recording, say): the scan waits for it and closes its cursor."""
    from audit.verify import _rows

    rows = _rows(None, False)
    assert len(next(rows)) == 3  # the fixture's batch size
    rows.close()
    assert AuditEvent.objects.count() == 28
    assert verify_ledger().breaks == []


def test_the_scan_puts_back_the_callers_jit_setting(ledger):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("JIT is a PostgreSQL setting")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = on")
    assert verify_ledger().breaks == []
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "on"
