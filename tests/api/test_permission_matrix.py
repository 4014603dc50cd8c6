"""The permission matrix: every write endpoint (and the restricted reads) against every kind of
credential — analyst, supervisor, auditor, admin (sessions), an API key of each role, a person of
another tenant, anonymous. Each refusal has the error body and changes nothing; each allowed
request succeeds. A key has the rights of its role except that it never decides: approving,
rejecting, deciding a case are refused to every key with 403 person_required."""

import pytest

from cases import services
from integrations.models import WebhookEndpoint
from runs.models import AgentRun
from tests.api.conftest import assert_error
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db

PERSONAS = ["analyst", "supervisor", "auditor", "admin", "key:analyst", "key:supervisor", "key:auditor", "key:admin",
            "outsider", "anonymous"]

OK = "ok"
# operation -> (method, path template, body, {role: outcome}); an outcome is OK or (status, code).
# Roles not listed are refused with 403 forbidden; another tenant gets 404 on our objects; anonymous 401.
FORBIDDEN = (403, "forbidden")
PERSON_REQUIRED = (403, "person_required")
OPERATIONS = {
    "case_read": ("get", "/api/v1/cases/{case}/", None, {"analyst": OK, "supervisor": OK, "auditor": OK, "admin": OK}),
    "case_create": ("post", "/api/v1/cases/", {"title": "New"}, {"analyst": OK, "supervisor": OK, "admin": OK}),
    "case_transition": ("post", "/api/v1/cases/{case}/transitions/", {"transition": "triage"},
                        {"analyst": OK, "supervisor": OK}),
    "evidence_add": ("post", "/api/v1/cases/{case}/evidence/", {"title": "t", "text": "x"},
                     {"analyst": OK, "supervisor": OK}),
    "proposal_create": ("post", "/api/v1/cases/{case}/proposals/",
                        {"kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "r"},
                        {"analyst": OK, "supervisor": OK}),
    "proposal_approve": ("post", "/api/v1/proposals/{proposal}/approve/", {}, {"supervisor": OK}),
    "proposal_reject": ("post", "/api/v1/proposals/{proposal}/reject/", {"note": "no"}, {"supervisor": OK}),
    # The case is new: a supervisor passes every permission check and meets the lifecycle (409).
    "case_decide": ("post", "/api/v1/cases/{case}/transitions/", {"transition": "decide", "reason": "Upheld."},
                    {"supervisor": (409, "not_allowed")}),
    "notice_draft": ("post", "/api/v1/cases/{case}/notices/", {"subject": "S", "body": "B"},
                     {"analyst": OK, "supervisor": OK}),
    "notice_approve": ("post", "/api/v1/notices/{notice}/approve/", {"content_hash": "{content_hash}"},
                       {"supervisor": OK}),
    "notice_reject": ("post", "/api/v1/notices/{notice}/reject/", {"note": "no"}, {"supervisor": OK}),
    "notice_submit": ("post", "/api/v1/notices/{draft}/submit/", None, {"analyst": OK, "supervisor": OK}),
    "notice_dispatch": ("post", "/api/v1/notices/{approved}/dispatch/", None, {"analyst": OK, "supervisor": OK}),
    "run_start": ("post", "/api/v1/runs/", {"case": "{case}"}, {"analyst": OK, "supervisor": OK, "admin": OK}),
    "thread_create": ("post", "/api/v1/threads/", {"title": "t"}, {"analyst": OK, "supervisor": OK}),
    "audit_read": ("get", "/api/v1/audit-events/", None, {"supervisor": OK, "auditor": OK, "admin": OK}),
    "webhook_create": ("post", "/api/v1/webhooks/", {"url": "https://hooks.example.org/x",
                                                     "event_types": ["case.changed"]},
                       {"supervisor": OK, "admin": OK}),
}
# Decisions: every API key is refused whatever its role (only a person signed in decides).
DECISIONS = {"proposal_approve", "proposal_reject", "case_decide", "notice_approve", "notice_reject"}


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)
    monkeypatch.setattr("cases.tasks.notice_dispatch_task.delay", lambda *args: None)


@pytest.fixture
def world(tenant, analyst_b, supervisor_b, case):
    proposal = services.proposal_create(actor=analyst_b, case=case, kind="risk_level", payload={"risk_level": "low"},
                                        rationale="r")
    notice = services.notice_submit(actor=analyst_b, notice=services.notice_draft(
        actor=analyst_b, case=case, subject="S", body="B", recipient=case.complainant_email))
    approved = services.notice_submit(actor=analyst_b, notice=services.notice_draft(
        actor=analyst_b, case=case, subject="S2", body="B2", recipient=case.complainant_email))
    approved = services.notice_approve(actor=supervisor_b, notice=approved, content_hash=approved.content_hash)
    draft = services.notice_draft(actor=analyst_b, case=case, subject="S3", body="B3", recipient=case.complainant_email)
    return {"case": case.reference, "proposal": proposal.pk, "notice": notice.pk,
            "content_hash": notice.content_hash, "approved": approved.pk, "draft": draft.pk, "case_obj": case}


def _client(persona, request, api, make_key, bearer):
    if persona == "anonymous":
        return api(None), None
    if persona.startswith("key:"):
        role = persona.split(":", 1)[1]
        return bearer(make_key(role)[1]), role
    user = request.getfixturevalue({"admin": "admin_user"}.get(persona, persona))
    return api(user), None if persona == "outsider" else user.role


def _fill(value, world):
    if isinstance(value, str):
        return value.format(**world)
    if isinstance(value, dict):
        return {key: _fill(item, world) for key, item in value.items()}
    return value


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_permission_matrix(request, api, make_key, bearer, world, operation, persona):
    method, path, body, allowed = OPERATIONS[operation]
    client, role = _client(persona, request, api, make_key, bearer)
    path, body = _fill(path, world), _fill(body, world)
    rows = {"runs": AgentRun.objects.count, "webhooks": WebhookEndpoint.objects.count}

    def call():
        return getattr(client, method)(path, body, format="json") if body is not None else getattr(client, method)(path)

    if persona == "anonymous":
        expected = (401, "not_authenticated")
    elif persona == "outsider":
        # Our objects do not exist for them; what they create lands in their own tenant.
        expected = OK if operation in ("case_create", "thread_create", "webhook_create") else (404, "not_found")
        if operation == "audit_read":
            expected = OK  # their own (empty) audit log
    elif persona.startswith("key:") and operation in DECISIONS:
        expected = PERSON_REQUIRED
    else:
        expected = allowed.get(role, FORBIDDEN)
    if expected == OK:
        response = call()
        assert response.status_code in (200, 201, 202), (operation, persona, response.content)
        return
    with assert_nothing_changed(world["case_obj"], extra=rows):
        response = call()
    assert_error(response, *expected)
