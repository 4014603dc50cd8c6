"""What an integration syncs with: ETag / If-Match (412), cursor lists with page_size, ordering and
updated_since, GET /me/, evidence download, Location and Retry-After, per-credential throttles."""

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from cases import services
from cases.models import Case
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


# --- ETag / If-Match ------------------------------------------------------------------------------

def test_a_case_transition_with_a_stale_if_match_is_412_and_changes_nothing(api, supervisor, case):
    client = api(supervisor)
    etag = client.get(f"/api/v1/cases/{case.reference}/")["ETag"]
    assert etag == f'"case-{case.pk}-v{case.version}"'
    services.case_transition(actor=supervisor, case=case, transition="triage")  # someone else moves it
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "start_review"},
                               format="json", HTTP_IF_MATCH=etag)
    assert_error(response, 412, "precondition_failed")
    fresh = client.get(f"/api/v1/cases/{case.reference}/")["ETag"]
    response = client.post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "start_review"},
                           format="json", HTTP_IF_MATCH=fresh)
    assert response.status_code == 200 and response["ETag"] != fresh


def test_expected_version_in_the_body_keeps_working(api, supervisor, case):
    response = api(supervisor).post(f"/api/v1/cases/{case.reference}/transitions/",
                                    {"transition": "triage", "expected_version": case.version + 5}, format="json")
    assert response.status_code == 409


def test_notice_approval_checks_if_match(api, analyst, supervisor, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="S", body="B", recipient=case.complainant_email)
    notice = services.notice_submit(actor=analyst, notice=notice)
    client = api(supervisor)
    etag = client.get(f"/api/v1/notices/{notice.pk}/")["ETag"]
    services.notice_edit(actor=analyst, notice=notice, body="Changed")
    notice.refresh_from_db()
    services.notice_submit(actor=analyst, notice=notice)
    notice.refresh_from_db()
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/notices/{notice.pk}/approve/", {"content_hash": notice.content_hash},
                               format="json", HTTP_IF_MATCH=etag)
    assert_error(response, 412, "precondition_failed")
    fresh = client.get(f"/api/v1/notices/{notice.pk}/")["ETag"]
    response = client.post(f"/api/v1/notices/{notice.pk}/approve/", {"content_hash": notice.content_hash},
                           format="json", HTTP_IF_MATCH=fresh)
    assert response.status_code == 200 and response["ETag"] != fresh


def test_proposal_decisions_check_if_match(api, analyst, supervisor, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="r")
    client = api(supervisor)
    etag = client.get(f"/api/v1/proposals/{proposal.pk}/")["ETag"]
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/proposals/{proposal.pk}/approve/", {}, format="json",
                               HTTP_IF_MATCH='"proposal-0-pending-c1"')
    assert_error(response, 412, "precondition_failed")
    assert client.post(f"/api/v1/proposals/{proposal.pk}/approve/", {}, format="json",
                       HTTP_IF_MATCH=etag).status_code == 200


# --- lists -----------------------------------------------------------------------------------------

def test_cursor_pages_respect_page_size_and_its_maximum(api, analyst, settings):
    settings.ARBITER_API_MAX_PAGE_SIZE = 3
    for index in range(5):
        make_case(actor=analyst, title=f"case {index}")
    client = api(analyst)
    first = client.get("/api/v1/cases/?page_size=3").json()
    assert len(first["results"]) == 3 and first["next"]
    second = client.get(first["next"]).json()
    assert len(second["results"]) == 2 and second["next"] is None
    seen = [c["reference"] for c in first["results"] + second["results"]]
    assert len(set(seen)) == 5
    assert_error(client.get("/api/v1/cases/?page_size=4"), 400, "invalid", fields={"page_size"})


def test_updated_since_and_ordering_sync_only_what_changed(api, analyst, supervisor):
    old = make_case(actor=analyst, title="old")
    Case.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(days=2))
    changed = make_case(actor=analyst, title="changed")
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    body = api(analyst).get("/api/v1/cases/", {"ordering": "updated_at", "updated_since": since}).json()
    assert [c["reference"] for c in body["results"]] == [changed.reference]
    ascending = api(analyst).get("/api/v1/cases/?ordering=updated_at").json()["results"]
    assert [c["reference"] for c in ascending] == [old.reference, changed.reference]


def test_me_describes_the_person(api, analyst):
    body = api(analyst).get("/api/v1/me/").json()
    assert body["person"] == {"id": analyst.pk, "username": "analyst",
                              "display_name": analyst.get_full_name() or "analyst"}
    assert (body["tenant"], body["role"], body["api_key_name"]) == ("acme", "analyst", None)


def test_evidence_downloads_and_201s_carry_location(api, analyst, case, outsider):
    client = api(analyst)
    upload = SimpleUploadedFile("letter.txt", b"Dear bank", content_type="text/plain")
    response = client.post(f"/api/v1/cases/{case.reference}/evidence/upload/", {"title": "Letter", "file": upload},
                           format="multipart")
    assert response.status_code == 201
    download = client.get(response["Location"])
    assert download.status_code == 200 and b"".join(download.streaming_content) == b"Dear bank"
    assert download["Content-Type"] == "application/octet-stream"  # the declared type is not vouched for
    text = client.post(f"/api/v1/cases/{case.reference}/evidence/", {"title": "Note", "text": "Called"},
                       format="json")
    assert client.get(text["Location"]).content == b"Called"
    assert_error(api(outsider).get(response["Location"]), 404, "not_found")
    created = client.post("/api/v1/cases/", {"title": "New"}, format="json")
    assert created["Location"] == f"/api/v1/cases/{created.json()['reference']}/" and created["ETag"]


def test_run_starts_answer_202_with_location_and_retry_after(api, analyst, case, settings):
    settings.ARBITER_API_RUN_POLL_SECONDS = 3
    response = api(analyst).post("/api/v1/runs/", {"case": case.reference}, format="json")
    assert response.status_code == 202
    assert response["Location"] == f"/api/v1/runs/{response.json()['id']}/" and response["Retry-After"] == "3"


def test_one_representation_for_a_person_and_a_run_id(api, analyst, supervisor, case):
    case = bring_case_to(case, "triaged", supervisor=supervisor)
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                        rationale="r")
    services.proposal_approve(actor=supervisor, proposal=proposal)
    body = api(analyst).get(f"/api/v1/proposals/{proposal.pk}/").json()
    assert body["decided_by"] == {"id": supervisor.pk, "username": "supervisor",
                                  "display_name": supervisor.get_full_name() or "supervisor"}
    assert body["run_id"] is None
    run = api(analyst).post("/api/v1/runs/", {"case": case.reference}, format="json").json()
    assert isinstance(run["id"], int)


# --- throttling per credential --------------------------------------------------------------------

def test_run_starts_are_throttled_per_credential(api, analyst, analyst_b, case, settings):
    settings.ARBITER_API_THROTTLE_RUN_START = "2/minute"
    client = api(analyst)
    for _ in range(2):
        assert client.post("/api/v1/runs/", {"case": case.reference}, format="json").status_code == 202
    with assert_nothing_changed(case):
        response = client.post("/api/v1/runs/", {"case": case.reference}, format="json")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert response.json()["code"] == "throttled"
    assert client.get("/api/v1/runs/").status_code == 200  # reads are not counted
    assert api(analyst_b).post("/api/v1/runs/", {"case": case.reference}, format="json").status_code == 202


def test_message_posts_are_throttled_per_credential(api, analyst, settings):
    settings.ARBITER_API_THROTTLE_MESSAGE_POST = "1/minute"
    client = api(analyst)
    thread = client.post("/api/v1/threads/", {"title": "t"}, format="json").json()
    assert client.post(f"/api/v1/threads/{thread['id']}/messages/", {"content": "a"}, format="json").status_code \
        == 202
    response = client.post(f"/api/v1/threads/{thread['id']}/messages/", {"content": "b"}, format="json")
    assert response.status_code == 429 and response["Retry-After"]


def test_case_scoped_writes_check_if_match_on_the_case(api, analyst, supervisor, case):
    client = api(analyst)
    etag = client.get(f"/api/v1/cases/{case.reference}/")["ETag"]
    services.case_transition(actor=supervisor, case=case, transition="triage")
    for path, body in ((f"/api/v1/cases/{case.reference}/evidence/", {"title": "t", "text": "x"}),
                       (f"/api/v1/cases/{case.reference}/proposals/",
                        {"kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "r"}),
                       (f"/api/v1/cases/{case.reference}/notices/", {"subject": "S", "body": "B"})):
        with assert_nothing_changed(case):
            assert_error(client.post(path, body, format="json", HTTP_IF_MATCH=etag), 412, "precondition_failed")
    fresh = client.get(f"/api/v1/cases/{case.reference}/")["ETag"]
    assert client.post(f"/api/v1/cases/{case.reference}/evidence/", {"title": "t", "text": "x"}, format="json",
                       HTTP_IF_MATCH=fresh).status_code == 201
