"""Bulk intake end to end through the service and the command: cases, events, due dates, audit,
the error report, idempotency and the dry run."""

from __future__ import annotations

import csv
import io
from datetime import date
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from audit.models import AuditEvent
from cases.deadlines import compute_due_dates
from cases.models import Case, CaseEvent, Evidence
from cases.reducer import diff_case
from cases.services.deadlines import deadline_policy_current
from core.actors import Actor
from core.errors import Forbidden, Invalid, NotFound
from intake.models import ComplaintImport, ImportedComplaint, ImportStatus
from intake.services import complaint_import_claim, complaint_import_run, complaint_import_start
from integrations.models import IntegrationEvent
from tests.audit.tampering import verify
from tests.helpers import assert_nothing_changed
from tests.intake.conftest import EXPECTED_PROBLEMS, NARRATIVE, csv_bytes, row

pytestmark = pytest.mark.django_db(transaction=False)


def run_import(path, tenant, actor=None) -> ComplaintImport:
    started = complaint_import_start(actor=actor or Actor.system("test-import"), tenant=tenant, path=str(path),
                                     enqueue=False)
    claimed = complaint_import_claim(import_id=started.pk)
    with open(path, "rb") as handle:
        return complaint_import_run(complaint_import=claimed, handle=handle)


def intake_counts() -> dict:
    return {"imports": ComplaintImport.objects.count(), "claims": ImportedComplaint.objects.count(),
            "cases": Case.objects.count(),
            "integration_events": IntegrationEvent.objects.count()}


def test_an_import_opens_a_case_per_good_row_with_events_deadlines_audit_and_an_error_report(tenant, fixed_csv):
    done = run_import(fixed_csv, tenant)

    assert (done.status, done.rows_read, done.created_count, done.duplicate_count, done.error_count) == (
        ImportStatus.DONE, 8, 2, 1, 5)
    assert done.unknown_columns == ["Internal note"]
    cases = {case.source_reference: case for case in Case.objects.filter(tenant=tenant)}
    assert set(cases) == {"1001", "1002"}
    first, second = cases["1001"], cases["1002"]
    assert (first.title, first.product, first.company, first.consumer_state, first.tags, first.source) == (
        "Trouble during payment process — Example Mortgage Co", "Mortgage", "Example Mortgage Co", "CA",
        "Older American", "CFPB")
    assert (second.title, second.tags, second.received_at) == ("Mortgage", "", date(2024, 3, 5))
    # Events as case_create writes them: case.created, then the narrative as evidence (versioned).
    assert list(first.events.values_list("sequence", "event_type", "case_version")) == [
        (1, "case.created", 1), (2, "evidence.added", 2)]
    assert list(second.events.values_list("sequence", "event_type", "case_version")) == [(1, "case.created", 1)]
    assert (first.version, second.version) == (2, 1)
    assert Evidence.objects.get(case=first).text == NARRATIVE
    assert not Evidence.objects.filter(case=second).exists()
    # Due dates under the tenant's current policy, recorded in case.created; the replay agrees.
    policy = deadline_policy_current(tenant_id=tenant.pk)
    for case in (first, second):
        due = compute_due_dates(policy, case.received_at)
        assert (case.acknowledge_due, case.response_due, case.close_due) == (
            due["acknowledge_due"], due["response_due"], due["close_due"])
        assert case.next_due == due["acknowledge_due"]
        assert case.deadline_policy_version == policy.version
        created = case.events.get(event_type="case.created").payload
        assert created["close_due"] == due["close_due"].isoformat()
        assert diff_case(case) == {}
    assert list(AuditEvent.objects.filter(stream=f"case:{first.pk}").values_list("sequence", "action")) == [
        (1, "cases.case.created"), (2, "cases.evidence.added")]
    assert IntegrationEvent.objects.filter(audit_event__stream__in=[f"case:{first.pk}", f"case:{second.pk}"]
                                           ).count() == 3
    assert "OK" in verify()
    # The error report: one line per bad row, its problem in words, the row as it was.
    with done.error_report.open("rb") as handle:
        report = list(csv.reader(io.StringIO(handle.read().decode("utf-8"))))
    assert report[0][:3] == ["Row", "Complaint ID", "Problem"]
    assert {int(line[0]): line[2] for line in report[1:]} == EXPECTED_PROBLEMS
    assert report[1][3:] == row(**{"Complaint ID": "1003", "Date received": "yesterday"})


def test_a_second_import_of_the_same_file_opens_nothing_and_says_so(tenant, fixed_csv):
    run_import(fixed_csv, tenant)
    cases = [case for case in Case.objects.all()]
    case_state = sorted(Case.objects.values_list("pk", "reference", "version"))
    before = (CaseEvent.objects.count(), Evidence.objects.count(),
              AuditEvent.objects.filter(stream__startswith="case:").count())

    again = run_import(fixed_csv, tenant)

    assert (again.created_count, again.duplicate_count, again.error_count) == (0, 3, 5)
    assert sorted(Case.objects.values_list("pk", "reference", "version")) == case_state
    assert (CaseEvent.objects.count(), Evidence.objects.count(),
            AuditEvent.objects.filter(stream__startswith="case:").count()) == before
    assert len(cases) == 2
    out = StringIO()
    call_command("import_complaints", str(fixed_csv), "--tenant", tenant.slug, stdout=out, stderr=StringIO())
    assert "Nothing new: all 3 complaints were already imported." in out.getvalue()
    assert Case.objects.count() == 2
    assert "OK" in verify()


def test_another_tenant_imports_the_same_complaints_as_its_own(tenant, other_tenant, fixed_csv):
    run_import(fixed_csv, tenant)
    theirs = run_import(fixed_csv, other_tenant)
    assert theirs.created_count == 2
    assert Case.objects.filter(tenant=other_tenant).count() == 2


def test_the_command_reports_bad_rows_to_a_file_and_shows_progress(tenant, fixed_csv, tmp_path):
    out, err = StringIO(), StringIO()
    report = tmp_path / "bad.csv"
    call_command("import_complaints", str(fixed_csv), "--tenant", tenant.slug, "--errors", str(report),
                 stdout=out, stderr=err)
    assert "2 cases opened, 1 already imported, 5 bad rows" in out.getvalue()
    assert "Columns ignored (not in the CFPB export format): Internal note" in out.getvalue()
    assert "100%" in err.getvalue()
    assert len(report.read_text().splitlines()) == 1 + 5


def test_the_dry_run_changes_nothing_and_counts_what_would_happen(tenant, fixed_csv):
    out = StringIO()
    with assert_nothing_changed(extra={"intake": intake_counts}):
        call_command("import_complaints", str(fixed_csv), "--tenant", tenant.slug, "--dry-run", stdout=out)
    assert "8 rows; 2 would open a case, 1 already imported, 5 bad" in out.getvalue()
    assert "row 4: The date received 'yesterday' is not a date" in out.getvalue()


@pytest.mark.parametrize(("content", "message"), [
    (b"", "The file is empty."),
    (b"PK\x03\x04rest-of-a-workbook", "This is a spreadsheet workbook, not a CSV file."),
    (csv_bytes([row()]).replace(b"Example", b"Ex\xe9mple"), "The file is not UTF-8 text"),
    (csv_bytes([row()], header=["Date received", "Product", "Issue", "Company"]), "The file has no column 'Complaint ID'"),
])
def test_a_file_that_cannot_be_imported_is_refused_and_nothing_is_created(tenant, tmp_path, content, message):
    path = tmp_path / "complaints.csv"
    path.write_bytes(content)
    with assert_nothing_changed(extra={"intake": intake_counts}), pytest.raises(Invalid) as refused:
        complaint_import_start(actor=Actor.system("test-import"), tenant=tenant, path=str(path), enqueue=False)
    assert message in refused.value.message
    with assert_nothing_changed(extra={"intake": intake_counts}), pytest.raises(CommandError, match=message[:20]):
        call_command("import_complaints", str(path), "--tenant", tenant.slug, stdout=StringIO())


def test_a_file_over_the_size_limit_is_refused(tenant, fixed_csv, settings):
    settings.INTAKE_MAX_UPLOAD_BYTES = 100
    with assert_nothing_changed(extra={"intake": intake_counts}), pytest.raises(Invalid, match="larger than the limit"):
        complaint_import_start(actor=Actor.system("test-import"), tenant=tenant, path=str(fixed_csv), enqueue=False)


def test_only_a_supervisor_of_the_tenant_or_the_system_may_import(tenant, analyst, outsider, agent, fixed_csv):
    for actor, error in ((analyst, Forbidden), (agent, Forbidden), (outsider, NotFound)):
        with assert_nothing_changed(extra={"intake": intake_counts}), pytest.raises(error):
            complaint_import_start(actor=actor, tenant=tenant, path=str(fixed_csv), enqueue=False)


def test_a_supervisor_import_is_recorded_as_theirs(tenant, supervisor, fixed_csv):
    done = run_import(fixed_csv, tenant, actor=supervisor)
    case = Case.objects.get(source_reference="1001")
    assert case.events.get(sequence=1).actor_id == f"user:{supervisor.pk}"
    assert list(AuditEvent.objects.filter(stream=f"tenant:{tenant.pk}").values_list("action", "actor_id")) == [
        ("intake.import.started", f"user:{supervisor.pk}"), ("intake.import.finished", f"user:{supervisor.pk}")]
    assert done.created_by == supervisor


def test_a_running_import_resumed_counts_its_own_earlier_rows_as_created(tenant, fixed_csv, settings):
    """A worker that died after some chunks: the rerun skips the cases it already opened and
    still counts them as this import's."""
    settings.INTAKE_CHUNK_ROWS = 1
    started = complaint_import_start(actor=Actor.system("test-import"), tenant=tenant, path=str(fixed_csv),
                                     enqueue=False)
    claimed = complaint_import_claim(import_id=started.pk)
    with open(fixed_csv, "rb") as handle:
        complaint_import_run(complaint_import=claimed, handle=handle)
    ComplaintImport.objects.filter(pk=started.pk).update(status=ImportStatus.QUEUED)
    claimed = complaint_import_claim(import_id=started.pk)
    with open(fixed_csv, "rb") as handle:
        again = complaint_import_run(complaint_import=claimed, handle=handle)
    assert (again.created_count, again.duplicate_count) == (2, 1)
    assert Case.objects.count() == 2


@pytest.mark.postgres
def test_imported_cases_get_the_search_words_a_case_written_alone_gets(tenant, tmp_path):
    """The words of the queue's search are written once per INSERT statement (cases migration 0012):
    after a bulk import every case's words are exactly what the per-case refresh computes, and a
    word of a narrative finds its case."""
    rows = [row(**{"Complaint ID": str(2000 + number), "Consumer complaint narrative": f"{NARRATIVE} Marker{number}x"})
            for number in range(3)]
    rows.append(row(**{"Complaint ID": "2099", "Consumer complaint narrative": ""}))
    path = tmp_path / "words.csv"
    path.write_bytes(csv_bytes(rows))
    assert run_import(path, tenant).created_count == 4

    with connection.cursor() as cursor:
        cursor.execute("SELECT case_id, words::text FROM web_casewords ORDER BY case_id")
        imported = cursor.fetchall()
        for case_id, _words in imported:
            cursor.execute("SELECT web_case_words_refresh(%s)", [case_id])
        cursor.execute("SELECT case_id, words::text FROM web_casewords ORDER BY case_id")
        assert cursor.fetchall() == imported
        cursor.execute("SELECT c.source_reference FROM web_casewords w JOIN cases_case c ON c.id = w.case_id "
                       "WHERE w.words @@ to_tsquery('simple', 'marker1x')")
        assert cursor.fetchall() == [("2001",)]
    assert len(imported) == Case.objects.filter(tenant=tenant).count() == 4
