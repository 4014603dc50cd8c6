"""/api/v1/cases/: list, retrieve, create, transitions, events, evidence."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from cases import services
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import CountDelta, assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db


def case_url(case, suffix=""):
    return f"/api/v1/cases/{case.reference}/{suffix}"


# --- list / retrieve --------------------------------------------------------------------------

def test_list_is_paginated_and_tenant_scoped(api, analyst, outsider, agent, case):
    make_case(actor=outsider, title="Another tenant's case")
    services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Loss.")
    body = api(analyst).get("/api/v1/cases/").json()
    assert len(body["results"]) == 1 and {"next", "previous"} <= set(body)
    row = body["results"][0]
    assert row["reference"] == case.reference and row["pending_proposals"] == 1 and row["status"] == "new"


def test_list_filters_and_searches(api, analyst):
    mortgage = make_case(actor=analyst, title="Escrow shortage", product="Mortgage")
    card = make_case(actor=analyst, title="Double charge", product="Credit card")
    services.case_transition(actor=analyst, case=card, transition="triage")
    client = api(analyst)
    assert [r["reference"] for r in client.get("/api/v1/cases/?status=triaged").json()["results"]] == [card.reference]
    assert [r["reference"] for r in client.get("/api/v1/cases/?search=escrow").json()["results"]] == [
        mortgage.reference]
    assert len(client.get("/api/v1/cases/?risk_level=high").json()["results"]) == 0


def test_an_unknown_filter_value_is_a_400_naming_the_parameter(api, analyst):
    assert_error(api(analyst).get("/api/v1/cases/?status=bogus"), 400, "invalid", fields={"status"})


def test_retrieve_by_reference(api, auditor, case):
    body = api(auditor).get(case_url(case)).json()
    assert body["reference"] == case.reference and body["version"] == case.version


def test_another_tenants_case_is_a_404(api, outsider, case):
    assert_error(api(outsider).get(case_url(case)), 404, "not_found")


def test_anonymous_requests_are_refused_with_the_error_body(api, case):
    response = api().get("/api/v1/cases/")
    body = assert_error(response, 401, "not_authenticated")
    assert "credentials" in body["detail"] and response["WWW-Authenticate"] == 'Bearer realm="api"'


# --- create -----------------------------------------------------------------------------------

def test_create_opens_a_case_with_its_narrative_as_evidence(api, analyst):
    with CountDelta() as delta:
        response = api(analyst).post("/api/v1/cases/", {
            "title": "Servicer lost my payment", "product": "Mortgage", "received_at": "2025-12-30",
            "complainant_email": "c@example.org", "narrative": "I paid on time."}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["reference"].startswith("CASE-2025-") and body["status"] == "new"
    assert delta.evidence == 1 and delta.case_events == 2 and delta.audit_events == 2


def test_create_with_bad_input_is_a_400_with_fields_and_opens_nothing(api, analyst):
    with assert_nothing_changed():
        response = api(analyst).post("/api/v1/cases/", {"title": "", "complainant_email": "nope",
                                                        "received_at": "soon"}, format="json")
    assert_error(response, 400, "invalid", fields={"title", "complainant_email", "received_at"})


def test_an_auditor_cannot_create_cases(api, auditor):
    with assert_nothing_changed():
        response = api(auditor).post("/api/v1/cases/", {"title": "Try"}, format="json")
    assert_error(response, 403, "forbidden")


# --- transitions ------------------------------------------------------------------------------

def test_transition_moves_the_case(api, analyst, case):
    with CountDelta() as delta:
        response = api(analyst).post(case_url(case, "transitions/"),
                                     {"transition": "triage", "expected_version": case.version}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "triaged"
    assert delta.case_events == 1 and delta.audit_events == 1


def test_transition_against_an_old_version_is_a_409_conflict(api, analyst, analyst_b, case):
    seen = case.version
    services.case_transition(actor=analyst_b, case=case, transition="triage")
    with assert_nothing_changed(case):
        response = api(analyst).post(case_url(case, "transitions/"),
                                     {"transition": "start_review", "expected_version": seen}, format="json")
    body = assert_error(response, 409, "conflict")
    assert "changed while you were looking" in body["detail"]


def test_transition_not_possible_now_is_a_409_not_allowed(api, analyst, case):
    with assert_nothing_changed(case):
        response = api(analyst).post(case_url(case, "transitions/"), {"transition": "close"}, format="json")
    assert_error(response, 403, "forbidden")  # analysts may never close
    with assert_nothing_changed(case):
        response = api(analyst).post(case_url(case, "transitions/"), {"transition": "mark_ready"}, format="json")
    assert_error(response, 409, "not_allowed")


def test_transition_by_a_role_without_the_right_is_a_403(api, auditor, case):
    with assert_nothing_changed(case):
        response = api(auditor).post(case_url(case, "transitions/"), {"transition": "triage"}, format="json")
    assert_error(response, 403, "forbidden")


def test_transition_with_bad_input_is_a_400_with_fields(api, analyst, supervisor, case):
    with assert_nothing_changed(case):
        response = api(analyst).post(case_url(case, "transitions/"),
                                     {"transition": "fly", "expected_version": 0}, format="json")
    assert_error(response, 400, "invalid", fields={"transition", "expected_version"})
    bring_case_to(case, "closed", supervisor=supervisor, analyst=analyst)
    with assert_nothing_changed(case):
        response = api(supervisor).post(case_url(case, "transitions/"), {"transition": "reopen"}, format="json")
    assert_error(response, 400, "invalid", fields={"reason"})


def test_transition_on_another_tenants_case_is_a_404(api, outsider, case):
    with assert_nothing_changed(case):
        response = api(outsider).post(case_url(case, "transitions/"), {"transition": "triage"}, format="json")
    assert_error(response, 404, "not_found")


# --- events -----------------------------------------------------------------------------------

def test_case_events_are_listed_in_order(api, auditor, analyst, case):
    services.case_transition(actor=analyst, case=case, transition="triage")
    body = api(auditor).get(case_url(case, "events/")).json()
    assert [e["event_type"] for e in body["results"]] == ["case.created", "evidence.added", "case.transitioned"]
    assert [e["sequence"] for e in body["results"]] == [1, 2, 3]


def test_case_events_of_another_tenant_are_a_404(api, outsider, case):
    assert_error(api(outsider).get(case_url(case, "events/")), 404, "not_found")


# --- evidence ---------------------------------------------------------------------------------

def test_evidence_is_listed_and_text_is_added(api, analyst, case):
    client = api(analyst)
    assert len(client.get(case_url(case, "evidence/")).json()["results"]) == 1
    with CountDelta() as delta:
        response = client.post(case_url(case, "evidence/"), {"title": "Call notes", "text": "Refund promised."},
                               format="json")
    assert response.status_code == 201 and response.json()["text"] == "Refund promised."
    assert delta.evidence == 1 and delta.audit_events == 1


def test_empty_text_evidence_is_a_400(api, analyst, case):
    with assert_nothing_changed(case):
        response = api(analyst).post(case_url(case, "evidence/"), {"title": "", "text": ""}, format="json")
    assert_error(response, 400, "invalid", fields={"title", "text"})


def test_a_file_is_uploaded_as_multipart(api, analyst, case):
    upload = SimpleUploadedFile("statement.csv", b"date,amount\n2026-01-02,1200\n", content_type="text/csv")
    response = api(analyst).post(case_url(case, "evidence/upload/"), {"title": "Statement", "file": upload},
                                 format="multipart")
    assert response.status_code == 201
    body = response.json()
    assert body["kind"] == "file" and body["filename"] == "statement.csv" and body["content_type"] == "text/csv"


def test_a_refused_file_type_is_a_400_on_the_file_field(api, analyst, case):
    upload = SimpleUploadedFile("tool.exe", b"MZ", content_type="application/x-msdownload")
    with assert_nothing_changed(case):
        response = api(analyst).post(case_url(case, "evidence/upload/"), {"title": "Tool", "file": upload},
                                     format="multipart")
    body = assert_error(response, 400, "invalid", fields={"file"})
    assert "not accepted" in body["fields"]["file"][0]


def test_an_upload_without_a_file_is_a_400(api, analyst, case):
    with assert_nothing_changed(case):
        response = api(analyst).post(case_url(case, "evidence/upload/"), {"title": "Nothing"}, format="multipart")
    assert_error(response, 400, "invalid", fields={"file"})


def test_evidence_on_a_closed_case_is_a_409(api, analyst, supervisor, case):
    bring_case_to(case, "closed", supervisor=supervisor, analyst=analyst)
    with assert_nothing_changed(case):
        response = api(supervisor).post(case_url(case, "evidence/"), {"title": "Late", "text": "More."},
                                        format="json")
    assert_error(response, 409, "not_allowed")


def test_an_auditor_cannot_add_evidence(api, auditor, case):
    with assert_nothing_changed(case):
        response = api(auditor).post(case_url(case, "evidence/"), {"title": "Note", "text": "x"}, format="json")
    assert_error(response, 403, "forbidden")


def test_evidence_of_another_tenant_is_a_404(api, outsider, case):
    assert_error(api(outsider).get(case_url(case, "evidence/")), 404, "not_found")
    with assert_nothing_changed(case):
        response = api(outsider).post(case_url(case, "evidence/"), {"title": "Note", "text": "x"}, format="json")
    assert_error(response, 404, "not_found")
