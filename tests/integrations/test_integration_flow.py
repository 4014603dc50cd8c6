"""The whole integration flow: API keys open a case, upload evidence, start a run, receive the
run.finished webhook and draft a notice; a supervisor key may not decide (person_required), so a
supervisor signed in approves; a key then dispatches twice with one Idempotency-Key -> one email and
a replayed response."""

import json

import pytest
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile

from cases.models import Notice, Proposal, ProposalStatus
from cases.tasks import notice_dispatch_task
from integrations.models import DeliveryStatus, WebhookDelivery
from integrations.tasks import webhook_deliver_due_task
from integrations.webhooks import verify_signature
from runs.models import AgentRun, RunStatus
from tests.api.conftest import assert_error
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """What would go to the broker is captured; the test plays the worker."""
    sent = {"steps": [], "dispatches": []}
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: sent["steps"].append(run_id))
    monkeypatch.setattr("integrations.tasks.webhook_deliver_task.delay", lambda delivery_id: None)
    monkeypatch.setattr("cases.tasks.notice_dispatch_task.delay",
                        lambda *args: sent["dispatches"].append(args))
    return sent


def test_the_whole_flow_with_api_keys_and_a_person_deciding(tenant, make_key, bearer, api, supervisor_b, receiver,
                                                            no_broker, django_capture_on_commit_callbacks):
    _, analyst_key = make_key("analyst", name="CRM")
    _, supervisor_key = make_key("supervisor", name="Back office")
    analyst, supervisor = bearer(analyst_key), bearer(supervisor_key)

    hook = supervisor.post("/api/v1/webhooks/", {"url": receiver.url, "event_types": ["run.finished"]},
                           format="json")
    assert hook.status_code == 201
    secret = hook.json()["secret"]

    case = analyst.post("/api/v1/cases/", {
        "title": "Charged twice for one purchase", "product": "Credit card", "complainant_email": "c@example.org",
        "narrative": "I was charged twice for the same purchase and the bank refuses to refund it."},
        format="json", HTTP_IDEMPOTENCY_KEY="case-1")
    assert case.status_code == 201
    reference = case.json()["reference"]
    upload = SimpleUploadedFile("statement.txt", b"Two charges of $120 on 3 May.", content_type="text/plain")
    evidence = analyst.post(f"/api/v1/cases/{reference}/evidence/upload/", {"title": "Statement", "file": upload},
                            format="multipart", HTTP_IDEMPOTENCY_KEY="ev-1")
    assert evidence.status_code == 201

    started = analyst.post("/api/v1/runs/", {"case": reference}, format="json", HTTP_IDEMPOTENCY_KEY="run-1")
    assert started.status_code == 202 and started["Retry-After"]
    run = drive(AgentRun.objects.get(pk=started.json()["id"]))
    assert run.status == RunStatus.COMPLETED
    assert webhook_deliver_due_task() == 1
    request = receiver.next()
    assert verify_signature(secret=secret, header=request["headers"]["Arbiter-Signature"], body=request["body"],
                            tolerance_seconds=300)
    event = json.loads(request["body"])
    assert (event["type"], event["data"]["run_id"], event["data"]["case"]) == ("run.finished", run.pk, reference)
    assert WebhookDelivery.objects.get().status == DeliveryStatus.SUCCEEDED

    # A key never decides, whatever its role: the supervisor key's approval is refused and changes
    # nothing; a supervisor signed in approves what the agents proposed.
    person = api(supervisor_b)
    pending = list(Proposal.objects.filter(case__reference=reference, status=ProposalStatus.PENDING))
    assert pending
    with assert_nothing_changed():
        assert_error(supervisor.post(f"/api/v1/proposals/{pending[0].pk}/approve/", {"note": "ok"}, format="json"),
                     403, "person_required")
    for proposal in pending:
        response = person.post(f"/api/v1/proposals/{proposal.pk}/approve/", {"note": "ok"}, format="json")
        assert response.status_code in (200, 409), response.content  # 409: made stale by a sibling
    own = analyst.post(f"/api/v1/cases/{reference}/proposals/", {
        "kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "Repeated double charges."},
        format="json")
    with assert_nothing_changed():
        assert_error(analyst.post(f"/api/v1/proposals/{own.json()['id']}/approve/", {}, format="json"), 403,
                     "person_required")

    notice = analyst.post(f"/api/v1/cases/{reference}/notices/", {"subject": "Your complaint",
                                                                  "body": "We are refunding the charge."},
                          format="json").json()
    notice = analyst.post(f"/api/v1/notices/{notice['id']}/submit/").json()
    etag_response = supervisor.get(f"/api/v1/notices/{notice['id']}/")
    with assert_nothing_changed():
        assert_error(supervisor.post(f"/api/v1/notices/{notice['id']}/approve/",
                                     {"content_hash": notice["content_hash"]}, format="json",
                                     HTTP_IF_MATCH=etag_response["ETag"]), 403, "person_required")
    approved = person.post(f"/api/v1/notices/{notice['id']}/approve/", {"content_hash": notice["content_hash"]},
                           format="json", HTTP_IF_MATCH=etag_response["ETag"])
    assert approved.status_code == 200 and approved.json()["status"] == "approved"

    with django_capture_on_commit_callbacks(execute=True):
        first = supervisor.post(f"/api/v1/notices/{notice['id']}/dispatch/", HTTP_IDEMPOTENCY_KEY="send-1")
        second = supervisor.post(f"/api/v1/notices/{notice['id']}/dispatch/", HTTP_IDEMPOTENCY_KEY="send-1")
    assert first.status_code == second.status_code == 202
    assert second["Idempotent-Replayed"] == "true" and second.json() == first.json()
    assert len(no_broker["dispatches"]) == 1
    for args in no_broker["dispatches"]:
        notice_dispatch_task.apply(args=args)
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["c@example.org"]
    assert Notice.objects.get(pk=notice["id"]).status == "sent"


def test_a_key_role_limits_what_it_may_do(tenant, case, make_key, bearer, analyst, supervisor):
    from cases import services

    notice = services.notice_submit(actor=analyst, notice=services.notice_draft(
        actor=analyst, case=case, subject="S", body="B", recipient="c@example.org"))
    _, auditor_key = make_key("auditor")
    _, analyst_key = make_key("analyst")
    with assert_nothing_changed(case):
        assert_error(bearer(analyst_key).post(f"/api/v1/notices/{notice.pk}/approve/",
                                              {"content_hash": notice.content_hash}, format="json"), 403,
                     "person_required")
        assert_error(bearer(auditor_key).post("/api/v1/cases/", {"title": "x"}, format="json"), 403, "forbidden")
