"""/api/v1/notices/ and /api/v1/cases/<ref>/notices/: draft, edit, submit, approve, reject,
withdraw, dispatch."""

import pytest

from cases import services
from cases.models import NoticeStatus
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import CountDelta, assert_nothing_changed

pytestmark = pytest.mark.django_db


def _pending(analyst, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="We received your complaint",
                                   body="We are looking into it.")
    return services.notice_submit(actor=analyst, notice=notice)


def _approved(analyst, supervisor, case):
    notice = _pending(analyst, case)
    return services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)


def test_draft_defaults_the_recipient_to_the_complainant(api, analyst, case):
    with CountDelta() as delta:
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/notices/",
                                     {"subject": "Hello", "body": "We are on it."}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["recipient"] == case.complainant_email and body["status"] == "draft" and len(body["content_hash"]) == 64
    assert delta.notices == 1 and delta.emails == 0



def test_a_draft_with_no_recipient_on_a_case_with_no_address_is_a_409_and_changes_nothing(api, analyst):
    case = make_case(actor=analyst, complainant_email="")
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/notices/",
                                     {"subject": "Hello", "body": "Dear customer"}, format="json")
    assert_error(response, 409, "not_allowed", fields={"recipient"})

def test_draft_with_bad_input_is_a_400_with_fields(api, analyst, case):
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/notices/",
                                     {"recipient": "nobody", "subject": "", "body": ""}, format="json")
    assert_error(response, 400, "invalid", fields={"recipient", "subject", "body"})


def test_draft_refusals(api, auditor, outsider, case):
    data = {"subject": "Hello", "body": "Text."}
    with assert_nothing_changed(case):
        assert_error(api(auditor).post(f"/api/v1/cases/{case.reference}/notices/", data, format="json"),
                     403, "forbidden")
        assert_error(api(outsider).post(f"/api/v1/cases/{case.reference}/notices/", data, format="json"),
                     404, "not_found")


def test_list_filters_and_is_tenant_scoped(api, analyst, outsider, case):
    notice = _pending(analyst, case)
    services.notice_draft(actor=analyst, case=case, subject="Second", body="Text.")
    client = api(analyst)
    assert len(client.get("/api/v1/notices/").json()["results"]) == 2
    assert [n["id"] for n in client.get("/api/v1/notices/?status=pending_approval").json()["results"]] == [notice.pk]
    assert len(client.get(f"/api/v1/notices/?case={case.reference}").json()["results"]) == 2
    assert_error(client.get("/api/v1/notices/?status=lost"), 400, "invalid", fields={"status"})
    assert len(api(outsider).get("/api/v1/notices/").json()["results"]) == 0
    assert_error(api(outsider).get(f"/api/v1/notices/{notice.pk}/"), 404, "not_found")


def test_edit_after_approval_voids_it_and_returns_to_draft(api, analyst, supervisor, case):
    notice = _approved(analyst, supervisor, case)
    response = api(analyst).patch(f"/api/v1/notices/{notice.pk}/", {"body": "A new promise."}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "draft" and body["content_hash"] != notice.content_hash and body["version"] == 2
    assert notice.approvals.get().voided_at is not None


def test_edit_refusals(api, analyst, auditor, outsider, supervisor, case, queued):
    notice = _approved(analyst, supervisor, case)
    with assert_nothing_changed(case):
        assert_error(api(analyst).patch(f"/api/v1/notices/{notice.pk}/", {}, format="json"), 400, "invalid",
                     fields={"non_field_errors"})
        assert_error(api(analyst).patch(f"/api/v1/notices/{notice.pk}/", {"recipient": "x"}, format="json"),
                     400, "invalid", fields={"recipient"})
        assert_error(api(auditor).patch(f"/api/v1/notices/{notice.pk}/", {"body": "x"}, format="json"),
                     403, "forbidden")
        assert_error(api(outsider).patch(f"/api/v1/notices/{notice.pk}/", {"body": "x"}, format="json"),
                     404, "not_found")
    services.notice_withdraw(actor=analyst, notice=notice)
    with assert_nothing_changed(case):
        assert_error(api(analyst).patch(f"/api/v1/notices/{notice.pk}/", {"body": "x"}, format="json"),
                     409, "not_allowed")


def test_submit_and_its_refusals(api, analyst, auditor, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Hello", body="Text.")
    with assert_nothing_changed(case):
        assert_error(api(auditor).post(f"/api/v1/notices/{notice.pk}/submit/"), 403, "forbidden")
    response = api(analyst).post(f"/api/v1/notices/{notice.pk}/submit/")
    assert response.status_code == 200 and response.json()["status"] == "pending_approval"
    with assert_nothing_changed(case):
        assert_error(api(analyst).post(f"/api/v1/notices/{notice.pk}/submit/"), 409, "not_allowed")


def test_approve_binds_the_approval_to_the_hash_seen(api, analyst, supervisor, case):
    notice = _pending(analyst, case)
    response = api(supervisor).post(f"/api/v1/notices/{notice.pk}/approve/",
                                    {"content_hash": notice.content_hash, "note": "Fine."}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert notice.approvals.get().content_hash == notice.content_hash


def test_approve_with_an_old_hash_is_a_409_stale(api, analyst, supervisor, case):
    notice = _pending(analyst, case)
    seen = notice.content_hash
    services.notice_edit(actor=analyst, notice=notice, body="Changed.")
    services.notice_submit(actor=analyst, notice=notice)
    with assert_nothing_changed(case):
        response = api(supervisor).post(f"/api/v1/notices/{notice.pk}/approve/", {"content_hash": seen},
                                        format="json")
    assert "changed since you opened it" in assert_error(response, 409, "stale")["detail"]


def test_approve_refusals(api, analyst, auditor, supervisor, outsider, case):
    mine = _pending(supervisor, case)
    theirs = _pending(analyst, case)
    with assert_nothing_changed(case):
        assert_error(api(supervisor).post(f"/api/v1/notices/{mine.pk}/approve/",
                                          {"content_hash": mine.content_hash}, format="json"), 403, "forbidden")
        assert_error(api(analyst).post(f"/api/v1/notices/{theirs.pk}/approve/",
                                       {"content_hash": theirs.content_hash}, format="json"), 403, "forbidden")
        assert_error(api(auditor).post(f"/api/v1/notices/{theirs.pk}/approve/",
                                       {"content_hash": theirs.content_hash}, format="json"), 403, "forbidden")
        assert_error(api(outsider).post(f"/api/v1/notices/{theirs.pk}/approve/",
                                        {"content_hash": theirs.content_hash}, format="json"), 404, "not_found")
        assert_error(api(supervisor).post(f"/api/v1/notices/{theirs.pk}/approve/", {}, format="json"),
                     400, "invalid", fields={"content_hash"})


def test_reject_needs_a_note_then_rejects(api, analyst, supervisor, case):
    notice = _pending(analyst, case)
    with assert_nothing_changed(case):
        assert_error(api(supervisor).post(f"/api/v1/notices/{notice.pk}/reject/", {}, format="json"),
                     400, "invalid", fields={"note"})
    response = api(supervisor).post(f"/api/v1/notices/{notice.pk}/reject/", {"note": "Wrong tone."}, format="json")
    assert response.status_code == 200 and response.json()["status"] == NoticeStatus.REJECTED
    with assert_nothing_changed(case):
        assert_error(api(supervisor).post(f"/api/v1/notices/{notice.pk}/reject/", {"note": "Again."},
                                          format="json"), 409, "not_allowed")


def test_withdraw_and_its_refusals(api, analyst, auditor, case):
    notice = _pending(analyst, case)
    with assert_nothing_changed(case):
        assert_error(api(auditor).post(f"/api/v1/notices/{notice.pk}/withdraw/"), 403, "forbidden")
    response = api(analyst).post(f"/api/v1/notices/{notice.pk}/withdraw/")
    assert response.status_code == 200 and response.json()["status"] == "withdrawn"
    with assert_nothing_changed(case):
        assert_error(api(analyst).post(f"/api/v1/notices/{notice.pk}/withdraw/"), 409, "not_allowed")


def test_dispatch_queues_the_send_after_commit(api, analyst, supervisor, case, queued,
                                               django_capture_on_commit_callbacks):
    notice = _approved(analyst, supervisor, case)
    with django_capture_on_commit_callbacks(execute=True):
        response = api(analyst).post(f"/api/v1/notices/{notice.pk}/dispatch/")
    assert response.status_code == 202 and response.json()["id"] == notice.pk
    queued.assert_called_once_with(notice.pk, analyst.pk)


@pytest.mark.parametrize("persona, expected", [("auditor", (403, "forbidden")), ("outsider", (404, "not_found"))])
def test_dispatch_refused_by_person_queues_nothing(api, request, analyst, supervisor, case, queued, persona,
                                                   expected, django_capture_on_commit_callbacks):
    notice = _approved(analyst, supervisor, case)
    user = request.getfixturevalue(persona)
    with assert_nothing_changed(case), django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api(user).post(f"/api/v1/notices/{notice.pk}/dispatch/")
    assert_error(response, *expected)
    assert callbacks == [] and not queued.called


def test_dispatch_of_an_unapproved_or_edited_notice_is_a_409_and_queues_nothing(
        api, analyst, supervisor, case, queued, django_capture_on_commit_callbacks):
    pending = _pending(analyst, case)
    with assert_nothing_changed(case), django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert_error(api(analyst).post(f"/api/v1/notices/{pending.pk}/dispatch/"), 409, "not_allowed")
    assert callbacks == [] and not queued.called


def test_dispatch_of_a_sent_notice_is_a_409_conflict(api, analyst, supervisor, case, queued,
                                                     django_capture_on_commit_callbacks):
    notice = _approved(analyst, supervisor, case)
    services.notice_dispatch(actor=supervisor, notice=notice)
    with assert_nothing_changed(case), django_capture_on_commit_callbacks(execute=True) as callbacks:
        body = assert_error(api(analyst).post(f"/api/v1/notices/{notice.pk}/dispatch/"), 409, "conflict")
    assert "sent only once" in body["detail"] and callbacks == [] and not queued.called
