"""/api/v1/proposals/ and /api/v1/cases/<ref>/proposals/."""

import pytest

from cases import services
from cases.models import ProposalStatus
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import CountDelta, assert_nothing_changed

pytestmark = pytest.mark.django_db


def _agent_proposal(agent, case, level="high"):
    return services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": level},
                                    rationale="The narrative reports a large loss.")


def test_create_records_a_proposal_against_the_current_version(api, analyst, case):
    with CountDelta() as delta:
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", {
            "kind": "risk_level", "payload": {"risk_level": "medium"}, "rationale": "Moderate loss.",
            "evidence_refs": [case.evidence.get().pk]}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending" and body["case_version"] == case.version and body["is_stale"] is False
    assert body["proposer_id"] == f"user:{analyst.pk}" and delta.proposals == 1 and delta.audit_events == 1


def test_create_with_an_idempotency_key_returns_the_first_proposal(api, analyst, case):
    data = {"kind": "risk_level", "payload": {"risk_level": "low"}, "rationale": "Small.", "idempotency_key": "k-1"}
    first = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", data, format="json").json()
    with assert_nothing_changed(case):
        again = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", data, format="json").json()
    assert again["id"] == first["id"]


@pytest.mark.parametrize("data, fields", [
    ({"kind": "risk_level", "payload": {"risk_level": "extreme"}, "rationale": "x"}, {"payload"}),
    ({"kind": "teleport", "payload": {}, "rationale": "x"}, {"kind"}),
    ({"kind": "risk_level", "payload": {"risk_level": "low"}, "rationale": "x", "evidence_refs": ["1"]},
     {"evidence_refs"}),
    ({"kind": "risk_level", "payload": {"risk_level": "low"}, "rationale": ""}, {"rationale"}),
])
def test_create_with_bad_input_is_a_400_with_fields(api, analyst, case, data, fields):
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", data, format="json")
    assert_error(response, 400, "invalid", fields=fields)


def test_an_auditor_cannot_propose(api, auditor, case):
    with assert_nothing_changed(case):
        response = api(auditor).post(f"/api/v1/cases/{case.reference}/proposals/", {
            "kind": "risk_level", "payload": {"risk_level": "low"}, "rationale": "x"}, format="json")
    assert_error(response, 403, "forbidden")


def test_proposing_on_another_tenants_case_is_a_404(api, outsider, case):
    with assert_nothing_changed(case):
        response = api(outsider).post(f"/api/v1/cases/{case.reference}/proposals/", {
            "kind": "risk_level", "payload": {"risk_level": "low"}, "rationale": "x"}, format="json")
    assert_error(response, 404, "not_found")


def test_list_filters_by_status_kind_and_case(api, supervisor, analyst, agent, case):
    other = make_case(actor=analyst, title="Other")
    first = _agent_proposal(agent, case)
    _agent_proposal(agent, other, level="low")
    services.proposal_reject(actor=supervisor, proposal=first, note="No.")
    client = api(supervisor)
    assert len(client.get("/api/v1/proposals/").json()["results"]) == 2
    pending = client.get("/api/v1/proposals/?status=pending").json()["results"]
    assert [p["case"] for p in pending] == [other.reference]
    by_case = client.get(f"/api/v1/proposals/?case={case.reference}&kind=risk_level").json()["results"]
    assert [p["id"] for p in by_case] == [first.pk]
    assert_error(client.get("/api/v1/proposals/?status=maybe"), 400, "invalid", fields={"status"})


def test_list_and_detail_are_tenant_scoped(api, outsider, agent, case):
    proposal = _agent_proposal(agent, case)
    assert len(api(outsider).get("/api/v1/proposals/").json()["results"]) == 0
    assert len(api(outsider).get(f"/api/v1/proposals/?case={case.reference}").json()["results"]) == 0
    assert_error(api(outsider).get(f"/api/v1/proposals/{proposal.pk}/"), 404, "not_found")


def test_a_supervisor_approves_and_the_case_changes(api, supervisor, agent, case):
    proposal = _agent_proposal(agent, case)
    with CountDelta() as delta:
        response = api(supervisor).post(f"/api/v1/proposals/{proposal.pk}/approve/", {"note": "Agreed."},
                                        format="json")
    assert response.status_code == 200 and response.json()["status"] == "applied"
    case.refresh_from_db()
    assert case.risk_level == "high" and delta.approvals == 1 and delta.case_events == 2


def test_an_analyst_cannot_approve(api, analyst, agent, case):
    proposal = _agent_proposal(agent, case)
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/proposals/{proposal.pk}/approve/", {}, format="json")
    assert_error(response, 403, "forbidden")


def test_the_proposer_cannot_approve_their_own(api, supervisor, case):
    proposal = services.proposal_create(actor=supervisor, case=case, kind="risk_level",
                                        payload={"risk_level": "low"}, rationale="Small.")
    with assert_nothing_changed(case):
        response = api(supervisor).post(f"/api/v1/proposals/{proposal.pk}/approve/", {}, format="json")
    assert "four eyes" in assert_error(response, 403, "forbidden")["detail"]


def test_approving_a_stale_proposal_is_a_409(api, supervisor, analyst, agent, case):
    proposal = _agent_proposal(agent, case)
    rival = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "medium"},
                                     rationale="Some loss.")
    services.proposal_approve(actor=supervisor, proposal=rival)
    with assert_nothing_changed(case):
        response = api(supervisor).post(f"/api/v1/proposals/{proposal.pk}/approve/", {}, format="json")
    assert "risk level changed from unassessed to medium" in assert_error(response, 409, "stale")["detail"]
    assert api(supervisor).get(f"/api/v1/proposals/{proposal.pk}/").json()["is_stale"] is True


def test_an_invalid_item_of_a_list_field_is_named_by_its_index_and_nothing_changes(api, supervisor, agent, case):
    """The error body's documented nested shape (core.api.ErrorOutputSerializer): a list field's bad
    item is reported under its index, one level down."""
    proposal = _agent_proposal(agent, case)
    with assert_nothing_changed(case):
        response = api(supervisor).post(f"/api/v1/proposals/{proposal.pk}/approve/",
                                        {"evidence_seen": ["x"]}, format="json")
    body = assert_error(response, 400, "invalid", fields={"evidence_seen"})
    assert body["fields"]["evidence_seen"] == {"0": ["A valid integer is required."]}
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING


def test_approving_a_decided_proposal_is_a_409_not_allowed(api, supervisor, supervisor_b, agent, case):
    proposal = _agent_proposal(agent, case)
    services.proposal_reject(actor=supervisor_b, proposal=proposal, note="No.")
    with assert_nothing_changed(case):
        response = api(supervisor).post(f"/api/v1/proposals/{proposal.pk}/approve/", {}, format="json")
    assert_error(response, 409, "not_allowed")


def test_approving_another_tenants_proposal_is_a_404(api, outsider, agent, case):
    proposal = _agent_proposal(agent, case)
    with assert_nothing_changed(case):
        response = api(outsider).post(f"/api/v1/proposals/{proposal.pk}/approve/", {}, format="json")
    assert_error(response, 404, "not_found")


def test_reject_needs_a_note(api, supervisor, agent, case):
    proposal = _agent_proposal(agent, case)
    with assert_nothing_changed(case):
        response = api(supervisor).post(f"/api/v1/proposals/{proposal.pk}/reject/", {"note": ""}, format="json")
    assert_error(response, 400, "invalid", fields={"note"})
    response = api(supervisor).post(f"/api/v1/proposals/{proposal.pk}/reject/", {"note": "Unsupported."},
                                    format="json")
    assert response.status_code == 200 and response.json()["status"] == "rejected"
    assert response.json()["decision_note"] == "Unsupported."


def test_reject_by_an_auditor_is_a_403(api, auditor, agent, case):
    proposal = _agent_proposal(agent, case)
    with assert_nothing_changed(case):
        response = api(auditor).post(f"/api/v1/proposals/{proposal.pk}/reject/", {"note": "No."}, format="json")
    assert_error(response, 403, "forbidden")


def test_withdraw_by_the_proposer_and_refusals(api, analyst, analyst_b, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                        rationale="Small.")
    with assert_nothing_changed(case):
        response = api(analyst_b).post(f"/api/v1/proposals/{proposal.pk}/withdraw/")
    assert_error(response, 403, "forbidden")
    response = api(analyst).post(f"/api/v1/proposals/{proposal.pk}/withdraw/")
    assert response.status_code == 200 and response.json()["status"] == ProposalStatus.WITHDRAWN
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/proposals/{proposal.pk}/withdraw/")
    assert_error(response, 409, "not_allowed")
