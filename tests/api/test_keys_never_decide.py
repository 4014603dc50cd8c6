"""Only people decide: an API key, whatever its role, is refused every decision through the API —
approving or rejecting a proposal or a notice, deciding, closing or reopening a case — with 403
`person_required` in the one error body, and nothing is written, queued or sent. Two supervisor
keys cannot make four eyes between themselves, and a notice approved by a key is never sent. Keys
still prepare work: propose, draft and submit notices, and request the sending of a notice a
person approved."""

import pytest

from cases import policy, services
from cases.models import Approval, ApprovalDecision, Notice, NoticeStatus, Proposal, ProposalStatus
from outbox.models import OutboxMessage
from tests.api.conftest import assert_error
from tests.helpers import CountDelta, assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db

KEY_ROLES = ["analyst", "supervisor", "auditor", "admin"]


def assert_person_required(response) -> dict:
    body = assert_error(response, 403, "person_required")
    assert body["detail"].startswith("Only a person signed in may ")
    assert "API keys may read, open cases, add evidence, propose, draft and submit notices" in body["detail"]
    return body


def _proposal(analyst, case) -> Proposal:
    return services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                    rationale="Repeated charges.")


def _pending_notice(analyst, case) -> Notice:
    notice = services.notice_draft(actor=analyst, case=case, subject="Your complaint", body="We are on it.")
    return services.notice_submit(actor=analyst, notice=notice)


@pytest.mark.parametrize("role", KEY_ROLES)
def test_a_key_cannot_approve_a_proposal(role, analyst, case, make_key, bearer):
    proposal = _proposal(analyst, case)
    client = bearer(make_key(role)[1])
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/proposals/{proposal.pk}/approve/", {"note": "ok"}, format="json")
    body = assert_person_required(response)
    assert "approve proposals" in body["detail"]
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING and not proposal.approvals.exists()


def test_a_supervisor_key_cannot_reject_a_proposal(analyst, case, make_key, bearer):
    proposal = _proposal(analyst, case)
    client = bearer(make_key("supervisor")[1])
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/proposals/{proposal.pk}/reject/", {"note": "No."}, format="json")
    assert "reject proposals" in assert_person_required(response)["detail"]


@pytest.mark.parametrize("role", KEY_ROLES)
def test_a_key_cannot_approve_a_notice(role, analyst, case, make_key, bearer):
    notice = _pending_notice(analyst, case)
    client = bearer(make_key(role)[1])
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/notices/{notice.pk}/approve/", {"content_hash": notice.content_hash},
                               format="json")
    assert "approve notices" in assert_person_required(response)["detail"]
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.PENDING_APPROVAL


def test_a_supervisor_key_cannot_reject_a_notice(analyst, case, make_key, bearer):
    notice = _pending_notice(analyst, case)
    client = bearer(make_key("supervisor")[1])
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/notices/{notice.pk}/reject/", {"note": "No."}, format="json")
    assert "reject notices" in assert_person_required(response)["detail"]


@pytest.mark.parametrize("role", ["supervisor", "analyst"])
@pytest.mark.parametrize(("transition", "status"), [("decide", "ready_for_decision"), ("close", "decided"),
                                                    ("reopen", "decided"), ("reopen", "closed")])
def test_a_key_cannot_decide_close_or_reopen_a_case(role, transition, status, analyst, supervisor, case,
                                                    make_key, bearer):
    case = bring_case_to(case, status, supervisor=supervisor, analyst=analyst)
    body = {"transition": transition, "reason": "Upheld; refund ordered.", "confirm_reason": "Told by phone.",
            "expected_version": case.version}
    client = bearer(make_key(role)[1])
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/cases/{case.reference}/transitions/", body, format="json")
    assert f"may {transition} a case" in assert_person_required(response)["detail"]
    case.refresh_from_db()
    assert case.status == status


def test_a_key_may_still_move_work_along(analyst, case, make_key, bearer):
    """The transitions that are not decisions stay open to a key of a role that may make them."""
    response = bearer(make_key("analyst")[1]).post(f"/api/v1/cases/{case.reference}/transitions/",
                                                   {"transition": "triage"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "triaged"
    assert "triage" not in policy.PERSON_ONLY_TRANSITIONS


def test_two_supervisor_keys_cannot_make_four_eyes(case, make_key, bearer, supervisor_b, api):
    first, second = bearer(make_key("supervisor", name="A")[1]), bearer(make_key("supervisor", name="B")[1])
    proposed = first.post(f"/api/v1/cases/{case.reference}/proposals/", {
        "kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "Repeated charges."}, format="json")
    assert proposed.status_code == 201
    drafted = first.post(f"/api/v1/cases/{case.reference}/notices/", {"subject": "S", "body": "B"}, format="json")
    submitted = first.post(f"/api/v1/notices/{drafted.json()['id']}/submit/")
    assert submitted.status_code == 200 and submitted.json()["status"] == "pending_approval"
    notice = submitted.json()
    with assert_nothing_changed(case):
        assert_person_required(second.post(f"/api/v1/proposals/{proposed.json()['id']}/approve/", {},
                                           format="json"))
        assert_person_required(second.post(f"/api/v1/notices/{notice['id']}/approve/",
                                           {"content_hash": notice["content_hash"]}, format="json"))
    # A supervisor signed in decides what the keys prepared.
    person = api(supervisor_b)
    assert person.post(f"/api/v1/proposals/{proposed.json()['id']}/approve/", {}, format="json").status_code == 200
    assert person.post(f"/api/v1/notices/{notice['id']}/approve/", {"content_hash": notice["content_hash"]},
                       format="json").status_code == 200


def _key_approved_notice(analyst, case, approver) -> Notice:
    """A notice whose only approval was given by a key's service account: the services refuse to
    create one now, so it is written directly (as one recorded before the rule, or around it)."""
    notice = _pending_notice(analyst, case)
    Approval.objects.create(tenant_id=case.tenant_id, notice=notice, approver=approver,
                            decision=ApprovalDecision.APPROVED, content_hash=notice.content_hash,
                            case_version=case.version, policy_version=policy.POLICY_VERSION)
    Notice.objects.filter(pk=notice.pk).update(status=NoticeStatus.APPROVED)
    notice.refresh_from_db()
    return notice


def test_an_analyst_key_cannot_dispatch_a_key_approved_notice(analyst, case, make_key, bearer):
    supervisor_key, _ = make_key("supervisor")
    notice = _key_approved_notice(analyst, case, approver=supervisor_key.user)
    client = bearer(make_key("analyst")[1])
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/notices/{notice.pk}/dispatch/")
    body = assert_error(response, 403, "person_required")
    assert "approved by an API key, not by a person" in body["detail"]
    assert not OutboxMessage.objects.exists()


def test_a_key_may_propose_draft_and_submit(case, make_key, bearer):
    client = bearer(make_key("analyst")[1])
    with CountDelta() as delta:
        proposed = client.post(f"/api/v1/cases/{case.reference}/proposals/", {
            "kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "Repeated charges."},
            format="json")
        drafted = client.post(f"/api/v1/cases/{case.reference}/notices/", {"subject": "S", "body": "B"},
                              format="json")
        submitted = client.post(f"/api/v1/notices/{drafted.json()['id']}/submit/")
    assert (proposed.status_code, drafted.status_code, submitted.status_code) == (201, 201, 200)
    assert submitted.json()["status"] == "pending_approval"
    assert (delta.proposals, delta.notices, delta.emails) == (1, 1, 0)


def test_a_key_may_request_the_dispatch_of_a_notice_a_person_approved(analyst, supervisor, case, make_key, bearer):
    notice = _pending_notice(analyst, case)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    api_key, key = make_key("analyst")
    response = bearer(key).post(f"/api/v1/notices/{notice.pk}/dispatch/")
    assert response.status_code == 202
    queued = OutboxMessage.objects.get(task="cases.tasks.notice_dispatch_task")
    assert queued.kwargs == {"notice_id": notice.pk, "actor_user_id": api_key.user_id}


def test_the_schema_carries_the_who_may_do_what_table(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    description = schema["info"]["description"]
    assert description.startswith("Cases, proposals, notices, runs and audit.")
    assert "| decide, close or reopen a case | — | yes | — | — | never |" in description
    assert "`person_required`" in description
