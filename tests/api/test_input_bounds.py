"""Every reproduction of a reported input bug (each used to answer an HTML 500 or a wrong status) as a
regression test: a JSON error in the one error shape, the right status, and nothing changed."""

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from cases.models import Proposal
from conversations.models import Thread
from runs import services as run_services
from runs.models import AgentRun
from tests.api.conftest import assert_error
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db

HUGE = 2**63  # past every integer column
BIG = 2**31  # past PostgreSQL's integer


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


def rows():
    return {"runs": lambda: AgentRun.objects.count(), "threads": lambda: Thread.objects.count()}


def post_raw(client, path, raw: str | bytes, content_type="application/json"):
    return client.post(path, data=raw, content_type=content_type)


# --- integers within database range -----------------------------------------------------------

def test_huge_evidence_ref_is_a_field_error(api, analyst, case):
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", {
            "kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "r", "evidence_refs": [HUGE]},
            format="json")
    assert_error(response, 400, "invalid", fields={"evidence_refs"})


def test_huge_thread_filter_is_a_field_error(api, analyst):
    assert_error(api(analyst).get(f"/api/v1/runs/?thread={HUGE}"), 400, "invalid", fields={"thread"})
    assert_error(api(analyst).get("/api/v1/runs/?thread=1.5"), 400, "invalid", fields={"thread"})


def test_huge_id_in_a_path_is_a_json_404(api, analyst):
    assert_error(api(analyst).get(f"/api/v1/proposals/{10**30}/"), 404, "not_found")


@pytest.mark.parametrize("budget", [{"max_tokens": BIG}, {"max_steps": HUGE}, {"max_wall_seconds": BIG}])
def test_run_start_budget_past_the_column_range_is_refused(api, analyst, case, budget):
    with assert_nothing_changed(case, extra=rows()):
        response = api(analyst).post("/api/v1/runs/", {"case": case.reference, "budget": budget}, format="json")
    assert_error(response, 400, "invalid", fields={"budget"})


def test_run_budget_above_the_server_ceiling_is_refused_with_the_maximum(api, analyst, case, settings):
    settings.ARBITER_API_MAX_RUN_TOKENS = 500_000
    with assert_nothing_changed(case, extra=rows()):
        response = api(analyst).post("/api/v1/runs/", {"case": case.reference,
                                                       "budget": {"max_tokens": 500_001}}, format="json")
    body = assert_error(response, 400, "invalid", fields={"budget"})
    assert "500000" in json.dumps(body["fields"])
    assert api(analyst).post("/api/v1/runs/", {"case": case.reference, "budget": {"max_tokens": 500_000}},
                             format="json").status_code == 202


@pytest.mark.parametrize("action", ["resume", "fork"])
def test_resume_and_fork_budgets_are_bounded(api, analyst, case, action):
    run = run_services.run_start(actor=analyst, case=case)
    body = {"budget": {"max_tokens": BIG}, **({"from_step": 0} if action == "fork" else {})}
    with assert_nothing_changed(case, extra=rows()):
        response = api(analyst).post(f"/api/v1/runs/{run.pk}/{action}/", body, format="json")
    assert_error(response, 400, "invalid", fields={"budget"})


def test_fork_from_step_past_the_range_is_refused(api, analyst, case):
    run = run_services.run_start(actor=analyst, case=case)
    response = api(analyst).post(f"/api/v1/runs/{run.pk}/fork/", {"from_step": HUGE}, format="json")
    assert_error(response, 400, "invalid", fields={"from_step"})


@pytest.mark.parametrize("token_budget", [BIG, 100_001])
def test_thread_token_budget_is_bounded_by_the_ceiling(api, analyst, token_budget):
    with assert_nothing_changed(extra=rows()):
        response = api(analyst).post("/api/v1/threads/", {"title": "t", "token_budget": token_budget}, format="json")
    assert_error(response, 400, "invalid", fields={"token_budget"})


# --- assignee_id strictly the integer id of a person of the tenant ---------------------------------

@pytest.mark.parametrize("assignee_id", ["abc", [1], {"id": 1}, "3", 1.5, True, HUGE, 0])
def test_assignee_id_must_be_an_integer(api, analyst, case, assignee_id):
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", {
            "kind": "assignment", "payload": {"team": "Cards", "assignee_id": assignee_id}, "rationale": "r"},
            format="json")
    body = assert_error(response, 400, "invalid", fields={"payload"})
    assert "assignee_id" in body["fields"]["payload"]


def test_assignee_must_be_a_person_of_the_tenant(api, analyst, outsider, case, make_key):
    api_key, _ = make_key("analyst")
    for person in (outsider.pk, api_key.user_id):
        with assert_nothing_changed(case):
            response = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", {
                "kind": "assignment", "payload": {"assignee_id": person}, "rationale": "r"}, format="json")
        # Who is an active person of the tenant is the server's state, not the body's shape: 409.
        assert_error(response, 409, "not_allowed", fields={"payload"})


def test_an_integer_assignee_of_the_tenant_is_stored_as_an_integer(api, analyst, analyst_b, case):
    response = api(analyst).post(f"/api/v1/cases/{case.reference}/proposals/", {
        "kind": "assignment", "payload": {"team": "Cards", "assignee_id": analyst_b.pk}, "rationale": "r"},
        format="json")
    assert response.status_code == 201
    assert Proposal.objects.get().payload["assignee_id"] == analyst_b.pk


# --- strings free of NUL and lone surrogates --------------------------------------------------------

@pytest.mark.parametrize("raw, field", [
    ('{"title": "a\\u0000b"}', "title"),
    ('{"title": "ok", "narrative": "x\\ud800y"}', "narrative"),
])
def test_nul_and_lone_surrogates_are_field_errors(api, analyst, raw, field):
    with assert_nothing_changed():
        response = post_raw(api(analyst), "/api/v1/cases/", raw)
    assert_error(response, 400, "invalid", fields={field})


def test_nul_inside_a_nested_payload_is_named(api, analyst, case):
    raw = json.dumps({"kind": "status_transition", "payload": {"transition": "triage", "reason": "a\u0000"},
                      "rationale": "r"})
    with assert_nothing_changed(case):
        response = post_raw(api(analyst), f"/api/v1/cases/{case.reference}/proposals/", raw)
    assert_error(response, 400, "invalid", fields={"payload.reason"})


def test_lone_surrogate_in_a_message_is_refused(api, analyst):
    thread = api(analyst).post("/api/v1/threads/", {"title": "t"}, format="json").json()
    with assert_nothing_changed(extra=rows()):
        response = post_raw(api(analyst), f"/api/v1/threads/{thread['id']}/messages/", '{"content": "\\udc00"}')
    assert_error(response, 400, "invalid", fields={"content"})


# --- nesting and size ---------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [25, 100_000])
def test_deeply_nested_json_is_a_parse_error(api, analyst, case, depth):
    raw = '{"kind": "risk_level", "rationale": "r", "payload": ' + "[" * depth + "]" * depth + "}"
    with assert_nothing_changed(case):
        response = post_raw(api(analyst), f"/api/v1/cases/{case.reference}/proposals/", raw)
    assert_error(response, 400, "parse_error")


def test_a_narrative_past_the_body_limit_is_a_json_413(api, analyst):
    narrative = "x" * int(5.5 * 1024 * 1024)
    with assert_nothing_changed():
        response = api(analyst).post("/api/v1/cases/", {"title": "big", "narrative": narrative}, format="json")
    assert_error(response, 413, "too_large")


def test_an_upload_past_the_upload_limit_is_a_json_413(api, analyst, case, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("big.txt", b"x" * 4096, content_type="text/plain")
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/evidence/upload/",
                                     {"title": "big", "file": upload}, format="multipart")
    assert_error(response, 413, "too_large")


def test_request_data_too_big_raised_by_django_is_a_json_413():
    """Django raises RequestDataTooBig while parsing a body without a Content-Length (chunked) past
    DATA_UPLOAD_MAX_MEMORY_SIZE: the API's exception handler answers it as 413."""
    from django.core.exceptions import RequestDataTooBig

    from core.api import exception_handler

    response = exception_handler(RequestDataTooBig("too big"), {})
    assert response.status_code == 413 and response.data["code"] == "too_large"


# --- statuses: 401 with WWW-Authenticate, 415, 405 ---------------------------------------------------

@pytest.mark.parametrize("header", [None, "Bearer nope", "Bearer arb_abc_def", "Basic YW5hbHlzdDpwdw==", "Token x"])
def test_missing_or_bad_credentials_are_401_with_www_authenticate(case, header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/cases/")
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert response.json()["code"] in {"not_authenticated", "authentication_failed"}


def test_an_unsupported_media_type_is_415(api, analyst):
    with assert_nothing_changed():
        response = post_raw(api(analyst), "/api/v1/cases/", "title=x", content_type="text/plain")
    assert_error(response, 415, "unsupported_media_type")


def test_a_wrong_method_is_405_json(api, analyst):
    assert_error(api(analyst).delete("/api/v1/cases/"), 405, "method_not_allowed")


# --- nothing under /api/ answers HTML ------------------------------------------------------------------

def test_post_to_an_unknown_api_path_with_basic_auth_is_a_json_404_not_a_csrf_page(analyst):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/api/v1/nothing-here/", data="{}", content_type="application/json",
                           HTTP_AUTHORIZATION="Basic YW5hbHlzdDphcmJpdGVyLWRlbW8=")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_found"


def test_a_session_post_without_csrf_token_is_a_json_403(analyst, case):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "triage"},
                               format="json")
    assert response.status_code == 403 and response["Content-Type"] == "application/json"
    assert "CSRF" in response.json()["detail"]


def test_django_error_handlers_answer_json_under_api_and_html_elsewhere(rf):
    from django.core.exceptions import RequestDataTooBig

    from core import api as core_api

    assert core_api.handler500(rf.get("/api/v1/cases/")).status_code == 500
    assert json.loads(core_api.handler500(rf.get("/api/v1/cases/")).content)["code"] == "server_error"
    too_big = core_api.handler400(rf.post("/api/v1/cases/"), RequestDataTooBig())
    assert too_big.status_code == 413 and json.loads(too_big.content)["code"] == "too_large"
    assert json.loads(core_api.handler404(rf.get("/api/x"), None).content)["code"] == "not_found"
    assert json.loads(core_api.csrf_failure(rf.post("/api/v1/cases/"), reason="no token").content)["code"] \
        == "csrf_failed"
    assert "text/html" in core_api.handler404(rf.get("/elsewhere/"), None)["Content-Type"]


# --- query parameters -------------------------------------------------------------------------------

def test_unknown_query_parameters_are_refused(api, analyst):
    body = assert_error(api(analyst).get("/api/v1/cases/?colour=red"), 400, "invalid", fields={"colour"})
    assert "Allowed:" in body["fields"]["colour"][0]
    assert_error(api(analyst).get("/api/v1/me/?x=1"), 400, "invalid", fields={"x"})


@pytest.mark.parametrize("query, field", [("page_size=0", "page_size"), ("page_size=100000", "page_size"),
                                          ("cursor=garbage", "cursor"), ("ordering=title", "ordering"),
                                          ("updated_since=yesterday", "updated_since"),
                                          ("updated_since=2026-01-01T00:00:00", "updated_since")])
def test_bad_list_parameters_are_field_errors(api, analyst, query, field):
    assert_error(api(analyst).get(f"/api/v1/cases/?{query}"), 400, "invalid", fields={field})


@pytest.mark.parametrize("url, status", [("/api/v1/cases/a%00b/", 404), ("/api/v1/cases/a%00b/events/", 404),
                                         ("/api/v1/cases/?search=a%00b", 400), ("/api/v1/proposals/?case=a%00", 400),
                                         ("/api/v1/events/?type=%00", 400)])
def test_nul_in_the_address_is_a_json_refusal_not_a_database_error(api, analyst, case, url, status):
    """PostgreSQL refuses NUL in text: it must never reach a query."""
    response = api(analyst).get(url)
    assert response.status_code == status and response["Content-Type"] == "application/json"


# --- bodies Django refuses while it parses them -----------------------------------------------

def test_a_form_body_is_a_415_and_changes_nothing(api, analyst, case):
    """Bodies are JSON (the schema names no other media type but the upload's multipart)."""
    body = "&".join(f"f{i}=x" for i in range(20))
    for url in (f"/api/v1/cases/{case.reference}/evidence/", "/api/v1/runs/", "/api/v1/cases/"):
        with assert_nothing_changed(case):
            response = post_raw(api(analyst), url, body, content_type="application/x-www-form-urlencoded")
        assert_error(response, 415, "unsupported_media_type")
        with assert_nothing_changed(case):
            response = api(analyst).post(url, {"title": "Form"}, format="multipart")
        assert_error(response, 415, "unsupported_media_type")


def test_a_multipart_body_with_more_fields_than_allowed_is_a_400_in_the_api_shape(api, analyst, case, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/evidence/upload/",
                                     {f"f{i}": "x" for i in range(20)}, format="multipart")
    assert_error(response, 400, "parse_error")
