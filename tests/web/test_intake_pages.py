"""The upload page of bulk intake: a supervisor uploads, a task imports, the page follows the
progress and offers the error report; everyone else is refused and nothing changes."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from cases.models import Case
from core.actors import Actor
from intake.models import ComplaintImport, ImportedComplaint, ImportStatus
from intake.services import complaint_import_start
from intake.tasks import complaint_import_task
from outbox.models import OutboxMessage
from tests.helpers import assert_nothing_changed
from tests.intake.conftest import FIXED_ROWS, csv_bytes

pytestmark = pytest.mark.django_db


def intake_counts() -> dict:
    return {"imports": ComplaintImport.objects.count(), "claims": ImportedComplaint.objects.count(),
            "cases": Case.objects.count()}


def upload(content: bytes, name: str = "complaints.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="text/csv")


def test_a_supervisor_uploads_a_file_a_task_imports_it_and_the_page_follows(
        client, supervisor, django_capture_on_commit_callbacks):
    client.force_login(supervisor)
    page = client.get("/imports/")
    assert page.status_code == 200 and b"Import complaints" in page.content

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/imports/", {"file": upload(csv_bytes(FIXED_ROWS))})
    started = ComplaintImport.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/imports/{started.pk}/"
    assert (started.status, started.filename, started.created_by) == (ImportStatus.QUEUED, "complaints.csv", supervisor)
    # The task is queued through the outbox, published once the upload has committed.
    assert list(OutboxMessage.objects.values_list("task", "kwargs")) == [
        ("intake.tasks.complaint_import_task", {"import_id": started.pk})]
    assert len(callbacks) == 1
    waiting = client.get(f"/imports/{started.pk}/", HTTP_HX_REQUEST="true")
    assert b"Waiting for a worker" in waiting.content and b'hx-trigger="every 1s"' in waiting.content

    assert complaint_import_task.apply(kwargs={"import_id": started.pk}).get() == "done"

    done = client.get(f"/imports/{started.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "Finished" in done and "hx-trigger" not in done
    assert '<dd id="import-created">2</dd>' in done and '<dd id="import-duplicates">1</dd>' in done
    assert '<dd id="import-errors">5</dd>' in done and 'value="100"' in done
    assert "Download the 5 bad rows (CSV)" in done
    assert "Columns ignored (not in the CFPB export format): Internal note." in done
    report = client.get(f"/imports/{started.pk}/errors.csv")
    assert report.status_code == 200 and report["Content-Type"] == "text/csv"
    assert "The Complaint ID is empty." in b"".join(report.streaming_content).decode()
    assert Case.objects.filter(tenant=supervisor.tenant).count() == 2
    # A second delivery of the task finds the import finished: nothing happens.
    assert complaint_import_task.apply(kwargs={"import_id": started.pk}).get() == "skipped"
    assert Case.objects.count() == 2


def test_the_progress_bar_shows_how_far_a_running_import_is(client, supervisor, tenant):
    running = ComplaintImport.objects.create(tenant=tenant, filename="big.csv", status=ImportStatus.RUNNING,
                                             bytes_total=1000, bytes_done=400, rows_read=120, created_count=100,
                                             duplicate_count=15, error_count=5, actor_id="user:1")
    client.force_login(supervisor)
    page = client.get(f"/imports/{running.pk}/").content.decode()
    assert 'value="40"' in page and "40% of the file read." in page and 'hx-trigger="every 1s"' in page
    assert '<dd id="import-rows">120</dd>' in page


def test_uploading_the_same_file_again_opens_nothing_and_says_so(client, supervisor, django_capture_on_commit_callbacks):
    client.force_login(supervisor)
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=False):
            client.post("/imports/", {"file": upload(csv_bytes(FIXED_ROWS))})
        complaint_import_task.apply(kwargs={"import_id": ComplaintImport.objects.latest("pk").pk}).get()
    second = ComplaintImport.objects.latest("pk")
    page = client.get(f"/imports/{second.pk}/").content.decode()
    assert "Nothing new: every complaint in this file had been imported before" in page
    assert Case.objects.count() == 2


@pytest.mark.parametrize(("name", "content", "message"), [
    ("complaints.csv", csv_bytes(FIXED_ROWS).replace(b"Example", b"Ex\xe9mple"), "The file is not UTF-8 text"),
    ("complaints.csv", b"Product,Issue\nMortgage,Late fee\n", "The file has no column"),
    ("complaints.xlsx", b"PK\x03\x04", "Only CSV files can be imported"),
])
def test_a_bad_file_is_refused_with_its_reason_and_nothing_is_created(client, supervisor, name, content, message):
    client.force_login(supervisor)
    with assert_nothing_changed(extra={"intake": intake_counts}):
        response = client.post("/imports/", {"file": upload(content, name)})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert "The file was not imported, and nothing was changed." in response.content.decode()


def test_an_analyst_is_refused_the_page_and_the_upload_and_nothing_changes(client, analyst):
    client.force_login(analyst)
    with assert_nothing_changed(extra={"intake": intake_counts}):
        assert client.get("/imports/").status_code == 403
        refused = client.post("/imports/", {"file": upload(csv_bytes(FIXED_ROWS))})
    assert refused.status_code == 403
    assert "Importing complaints is open to supervisors only." in refused.content.decode()
    assert b"/imports/" not in client.get("/").content  # no link in the navigation


def test_another_organisations_import_is_not_found(client, supervisor, other_tenant, tmp_path):
    path = tmp_path / "theirs.csv"
    path.write_bytes(csv_bytes(FIXED_ROWS))
    theirs = complaint_import_start(actor=Actor.system("test-import"), tenant=other_tenant, path=str(path),
                                    enqueue=False)
    client.force_login(supervisor)
    assert client.get(f"/imports/{theirs.pk}/").status_code == 404
    assert client.get(f"/imports/{theirs.pk}/errors.csv").status_code == 404
