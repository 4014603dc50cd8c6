"""Bulk intake's pipeline on PostgreSQL (intake.services._Pipeline): the next chunk's cases, events
and audit records are built in a second thread while a chunk is written. What it writes must be
what the in-line path writes; a wrong guess (a case opened meanwhile, a complaint already imported)
falls back to the in-line path; an error in the thread fails its chunk and leaves nothing of it."""

from __future__ import annotations

from datetime import date

import pytest

from audit.models import AuditEvent
from cases.models import Case, CaseEvent, Evidence
from cases.reducer import diff_case
from cases.services import case_create
from core.actors import Actor
from intake import services
from intake.models import ComplaintImport, ImportedComplaint, ImportStatus
from integrations.models import IntegrationEvent
from tests.audit.tampering import verify
from tests.intake.conftest import csv_bytes, row

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=False)]

ROWS = 11  # chunks of 3 rows: four chunks, the first built in line, the next three ahead


@pytest.fixture
def many_csv(tmp_path):
    path = tmp_path / "many.csv"
    path.write_bytes(csv_bytes([
        row(**{"Complaint ID": str(5000 + number), "Date received": f"{2023 + number % 2}-03-{1 + number:02d}",
               "Consumer complaint narrative": "" if number % 4 == 3 else f"Narrative {number}: a late fee."})
        for number in range(ROWS)]))
    return path


@pytest.fixture
def counted(monkeypatch):
    """How many chunks were written from a batch built ahead, and how many in line."""
    calls = {"ahead": 0, "in_line": 0}
    write, create = services.case_batch_write, services.case_create_many

    def ahead(**kwargs):
        written = write(**kwargs)
        calls["ahead"] += 1
        return written

    def in_line(**kwargs):
        calls["in_line"] += 1
        return create(**kwargs)

    monkeypatch.setattr(services, "case_batch_write", ahead)
    monkeypatch.setattr(services, "case_create_many", in_line)
    return calls


def run_import(path, tenant, on_progress=None) -> ComplaintImport:
    started = services.complaint_import_start(actor=Actor.system("test-import"), tenant=tenant, path=str(path),
                                              enqueue=False)
    claimed = services.complaint_import_claim(import_id=started.pk)
    with open(path, "rb") as handle:
        return services.complaint_import_run(complaint_import=claimed, handle=handle, on_progress=on_progress)


def written(tenant) -> dict:
    """Everything an import wrote for a tenant, by complaint id, without the ids of the rows."""
    result = {}
    for case in Case.objects.filter(tenant=tenant).order_by("source_reference"):
        events = [(event.sequence, event.event_type, event.case_version,
                   {key: value for key, value in event.payload.items() if key != "evidence_id"})
                  for event in CaseEvent.objects.filter(case=case).order_by("sequence")]
        audits = [(event.sequence, event.action, event.actor_id,
                   {key: value for key, value in event.payload.items() if key != "evidence_id"})
                  for event in AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("sequence")]
        evidence = list(Evidence.objects.filter(case=case).values_list("title", "text", "sha256", "size", "source"))
        feed = list(IntegrationEvent.objects.filter(audit_event__stream=f"case:{case.pk}").order_by("id")
                    .values_list("type", flat=True))
        result[case.source_reference] = {
            "case": (case.reference, case.title, case.received_at, case.acknowledge_due, case.response_due,
                     case.close_due, case.next_due, case.version, case.deadline_policy_version, case.status),
            "events": events, "audits": audits, "evidence": evidence, "feed": feed, "replay": diff_case(case)}
    return result


def test_the_pipeline_writes_what_the_in_line_path_writes(tenant, other_tenant, many_csv, settings, counted):
    settings.INTAKE_CHUNK_ROWS = 3
    settings.INTAKE_PIPELINE = False
    run_import(many_csv, other_tenant)
    assert counted == {"ahead": 0, "in_line": 4}

    settings.INTAKE_PIPELINE = True
    done = run_import(many_csv, tenant)

    assert counted == {"ahead": 3, "in_line": 5}
    assert (done.status, done.created_count, done.duplicate_count, done.error_count) == (ImportStatus.DONE, ROWS, 0, 0)
    ahead, in_line = written(tenant), written(other_tenant)
    assert len(ahead) == ROWS
    assert ahead == in_line
    assert all(item["replay"] == {} for item in ahead.values())
    references = sorted(item["case"][0] for item in ahead.values())
    assert references == [f"CASE-2023-{n:06d}" for n in range(1, 7)] + [f"CASE-2024-{n:06d}" for n in range(1, 6)]
    assert "OK" in verify()


def test_a_case_opened_meanwhile_makes_the_next_chunk_built_in_line(tenant, supervisor, many_csv, settings, counted):
    """The next chunk's reference numbers were guessed before an analyst opened a case: the guess is
    found wrong under the counter's lock and that chunk is built in line, with the next numbers."""
    settings.INTAKE_CHUNK_ROWS = 3
    opened = []

    def open_a_case(current):
        if not opened:
            opened.append(case_create(actor=supervisor, tenant=tenant, title="Opened by hand",
                                      received_at=date(2023, 5, 1)))

    done = run_import(many_csv, tenant, on_progress=open_a_case)

    assert counted == {"ahead": 2, "in_line": 2}
    assert done.created_count == ROWS
    references = list(Case.objects.filter(tenant=tenant).values_list("reference", flat=True))
    assert len(references) == len(set(references)) == ROWS + 1
    assert sorted(r for r in references if r.startswith("CASE-2023")) == [f"CASE-2023-{n:06d}" for n in range(1, 8)]
    assert all(diff_case(case) == {} for case in Case.objects.filter(tenant=tenant))
    assert "OK" in verify()


def test_a_chunk_with_a_complaint_imported_before_is_built_in_line(tenant, many_csv, tmp_path, settings, counted):
    settings.INTAKE_CHUNK_ROWS = 3
    first = tmp_path / "first.csv"
    first.write_bytes(csv_bytes([row(**{"Complaint ID": "5004"})]))  # in the second chunk of many_csv
    run_import(first, tenant)

    done = run_import(many_csv, tenant)

    assert (done.created_count, done.duplicate_count) == (ROWS - 1, 1)
    assert counted["ahead"] == 1  # the second chunk's guess failed; the third was then built in line too
    assert Case.objects.filter(tenant=tenant).count() == ROWS
    assert ImportedComplaint.objects.filter(tenant=tenant, complaint_id="5004").count() == 1
    assert "OK" in verify()


def test_an_error_in_the_preparing_thread_fails_its_chunk_cleanly_and_a_rerun_opens_each_case_once(
        tenant, many_csv, settings, monkeypatch):
    settings.INTAKE_CHUNK_ROWS = 3
    prepare, calls = services.case_batch_prepare, []

    def failing(**kwargs):
        calls.append(len(kwargs["new_cases"]))
        if len(calls) == 2:  # the third chunk's batch
            raise RuntimeError("the preparing thread failed")
        return prepare(**kwargs)

    monkeypatch.setattr(services, "case_batch_prepare", failing)
    with pytest.raises(RuntimeError, match="preparing thread failed"):
        run_import(many_csv, tenant)

    # The first two chunks committed; nothing of the third: no claim, case, event, audit record.
    assert Case.objects.filter(tenant=tenant).count() == 6
    assert ImportedComplaint.objects.filter(tenant=tenant).count() == 6
    assert CaseEvent.objects.filter(tenant=tenant).count() == Case.objects.filter(tenant=tenant).count() + \
        Evidence.objects.filter(tenant=tenant).count()
    assert AuditEvent.objects.filter(stream__startswith="case:").count() == CaseEvent.objects.count()
    progress = ComplaintImport.objects.get(status=ImportStatus.RUNNING)
    assert (progress.rows_read, progress.created_count) == (6, 6)

    monkeypatch.setattr(services, "case_batch_prepare", prepare)
    services.complaint_import_fail(import_id=progress.pk, reason="the preparing thread failed")
    again = run_import(many_csv, tenant)

    assert (again.created_count, again.duplicate_count) == (ROWS - 6, 6)
    assert Case.objects.filter(tenant=tenant).count() == ROWS
    assert sorted(Case.objects.filter(tenant=tenant).values_list("source_reference", flat=True)) == [
        str(5000 + n) for n in range(ROWS)]
    assert "OK" in verify()
