"""What the schema states, the server enforces, and the other way round (ADR 0028, addendum of
2026-11-27 on the contract at 0 failures): one body shape per proposal kind, a state refusal is
409, text fields take strings only, the run providers are this deployment's usable ones, a webhook
URL that leads nowhere allowed is 422. Every refusal here changes nothing."""

from __future__ import annotations

import json
import re
from contextlib import nullcontext

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from accounts.models import Role
from cases.models import Case, Proposal
from core.api_fields import NOT_TEXT
from integrations.api.views import SINCE_EVENT_PATTERN
from integrations.models import WebhookDelivery
from integrations.webhooks import webhook_endpoint_create
from runs import providers
from runs.models import AgentRun
from tests.api.conftest import assert_error
from tests.factories import UserFactory, make_case
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(tmp_path) -> dict:
    path = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(path))
    return json.loads(path.read_text())


def _propose(api, user, case, body):
    return api(user).post(f"/api/v1/cases/{case.reference}/proposals/", body, format="json")


# --- proposals: one shape per kind -------------------------------------------------------------------

def test_the_proposal_body_is_one_shape_per_kind(schema):
    components = schema["components"]["schemas"]
    body = components["ProposalCreateInputRequest"]
    assert body["discriminator"]["propertyName"] == "kind"
    assert set(body["discriminator"]["mapping"]) == {"status_transition", "risk_level", "assignment"}
    payloads = {kind: components[ref.rsplit("/", 1)[-1]]["properties"]["payload"]["$ref"].rsplit("/", 1)[-1]
                for kind, ref in body["discriminator"]["mapping"].items()}
    assert components[payloads["risk_level"]]["required"] == ["risk_level"]
    assert components[payloads["status_transition"]]["additionalProperties"] is False
    assert components[payloads["assignment"]]["anyOf"][1] == {"required": ["assignee_id"],
                                                               "properties": {"assignee_id": {"type": "integer"}}}
    operation = schema["paths"]["/api/v1/cases/{reference}/proposals/"]["post"]
    assert operation["requestBody"]["required"] is True


@pytest.mark.parametrize("body, fields", [
    ({"kind": "assignment", "payload": {}, "rationale": "r"}, {"payload"}),  # neither a team nor an assignee
    ({"kind": "assignment", "payload": {"team": "  "}, "rationale": "r"}, {"payload"}),
    ({"kind": "risk_level", "payload": {"risk_level": "low", "team": "x"}, "rationale": "r"}, {"payload"}),
    ({"kind": "risk_level", "payload": {"transition": "triage"}, "rationale": "r"}, {"payload"}),
    ({"payload": {"risk_level": "low"}, "rationale": "r"}, {"kind"}),
    ({"kind": 3, "payload": {"risk_level": "low"}, "rationale": "r"}, {"kind"}),
    ({"kind": "risk_level", "payload": {"risk_level": "low"}, "rationale": 7}, {"rationale"}),
])
def test_a_payload_that_is_not_its_kinds_shape_is_a_400(api, analyst, case, body, fields):
    with assert_nothing_changed(case):
        response = _propose(api, analyst, case, body)
    assert_error(response, 400, "invalid", fields=fields)


def test_a_body_that_is_not_an_object_is_a_400(api, analyst, case):
    with assert_nothing_changed(case):
        response = _propose(api, analyst, case, [{"kind": "risk_level"}])
    assert_error(response, 400, "invalid", fields={"non_field_errors"})


@pytest.mark.parametrize("body", [
    {"kind": "status_transition", "payload": {"transition": "close"}, "rationale": "r"},  # a new case cannot close
    {"kind": "risk_level", "payload": {"risk_level": "medium"}, "rationale": "r"},  # it is medium already
])
def test_what_the_case_does_not_allow_now_is_a_409(api, analyst, case, body):
    Case.objects.filter(pk=case.pk).update(risk_level="medium")
    case.refresh_from_db()
    with assert_nothing_changed(case):
        response = _propose(api, analyst, case, body)
    assert_error(response, 409, "not_allowed", fields={"payload"})


def test_evidence_of_another_case_is_a_409(api, analyst, case):
    other = make_case(actor=analyst, title="Another")
    with assert_nothing_changed(case, other):
        response = _propose(api, analyst, case, {"kind": "risk_level", "payload": {"risk_level": "high"},
                                                 "rationale": "r", "evidence_refs": [other.evidence.get().pk]})
    assert_error(response, 409, "not_allowed", fields={"evidence_refs"})


def test_an_assignee_who_left_is_a_409(api, analyst, case, tenant):
    left = UserFactory(username="left", tenant=tenant, role=Role.ANALYST, is_active=False)
    with assert_nothing_changed(case):
        response = _propose(api, analyst, case, {"kind": "assignment", "payload": {"team": "Cards",
                                                                                  "assignee_id": left.pk},
                                                 "rationale": "r"})
    body = assert_error(response, 409, "not_allowed", fields={"payload"})
    assert "assignee_id" in body["fields"]["payload"]


@pytest.mark.parametrize("body", [
    {"kind": "status_transition", "payload": {"transition": "triage", "reason": "New."}, "rationale": "r"},
    {"kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "r", "evidence_refs": []},
    {"kind": "assignment", "payload": {"team": "Cards"}, "rationale": "r"},
    {"kind": "assignment", "payload": {"team": "Cards", "assignee_id": None}, "rationale": "r"},
])
def test_each_kinds_shape_is_accepted(api, analyst, case, body):
    response = _propose(api, analyst, case, body)
    assert response.status_code == 201, response.json()
    assert Proposal.objects.get(pk=response.json()["id"]).kind == body["kind"]


# --- text fields take strings only -------------------------------------------------------------------

@pytest.mark.parametrize("title", [5, 5.96e-08, True, ["t"], {"t": 1}])
def test_a_text_field_refuses_a_value_that_is_not_a_string(api, analyst, title):
    with assert_nothing_changed(extra={"cases": Case.objects.count}):
        response = api(analyst).post("/api/v1/cases/", {"title": title}, format="json")
    body = assert_error(response, 400, "invalid", fields={"title"})
    assert body["fields"]["title"] == [NOT_TEXT]


def test_evidence_text_given_as_a_number_is_refused(api, analyst, case):
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/evidence/",
                                     {"title": "Note", "text": 5.96e-08}, format="json")
    assert_error(response, 400, "invalid", fields={"text"})


# --- run providers: this deployment's usable ones ----------------------------------------------------

def test_the_provider_enum_is_the_usable_providers(schema, settings):
    provider = schema["components"]["schemas"]["RunStartInputRequest"]["properties"]["provider"]
    enum = next(schema["components"]["schemas"][branch["$ref"].rsplit("/", 1)[-1]]["enum"]
                for branch in provider["oneOf"] if "Null" not in branch["$ref"])
    assert enum == list(providers.usable_provider_names())
    assert "offline" in enum


def test_a_provider_without_its_settings_is_not_usable_and_is_refused(api, analyst, case, settings):
    settings.OPENAI_BASE_URL = ""
    assert "openai" not in providers.usable_provider_names()
    with assert_nothing_changed(case, extra={"runs": AgentRun.objects.count}):
        response = api(analyst).post("/api/v1/runs/", {"case": case.reference, "provider": "openai"}, format="json")
    assert_error(response, 400, "invalid", fields={"provider"})
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = "https://llm.example/v1", "m"
    assert "openai" in providers.usable_provider_names()


# --- a webhook URL leading nowhere allowed ----------------------------------------------------------

def test_the_webhook_operations_document_url_unreachable(schema):
    for path, method in (("/api/v1/webhooks/", "post"), ("/api/v1/webhooks/{id}/", "patch")):
        response = schema["paths"][path][method]["responses"]["422"]
        assert "url_unreachable" in response["description"]
        examples = response["content"]["application/json"]["examples"].values()
        assert {"url_unreachable", "idempotency_key_reused"} == {example["value"]["code"] for example in examples}


# --- an e-mail address: the pattern the schema states is the server's rule --------------------------

@pytest.mark.parametrize("address, accepted", [
    ("name@example.org", True), (" h_^@ns.org ", True), ("a.b+c@mail.example.co", True),
    ("name@localhost", False), ("name@[192.0.2.1]", False), ('"quoted"@example.org', False),
    ("useratexample.com", False), ("a@b.c", False), ("a@-b.org", False), ("a@b.2s90v", False),
    ("VW=u.?!`'{.$@uD.pt2ZhYG-0Gh.HYm.O.sv", True),
])
def test_an_address_is_accepted_exactly_when_the_schema_pattern_matches(schema, api, analyst, address, accepted):
    pattern = schema["components"]["schemas"]["CaseCreateInputRequest"]["properties"]["complainant_email"]["pattern"]
    assert bool(re.search(pattern, address)) is accepted
    with assert_nothing_changed(extra={"cases": Case.objects.count}) if not accepted else nullcontext():
        response = api(analyst).post("/api/v1/cases/", {"title": "T", "complainant_email": address}, format="json")
    if accepted:
        assert response.status_code == 201, response.json()
    else:
        assert_error(response, 400, "invalid", fields={"complainant_email"})


# --- redelivery from an event: its id as text, a feed sequence as text or a number --------------------

@pytest.mark.parametrize("since_event", [True, 1.5, ["evt_1"], " evt_1", "evt_x", "1\n\n", -1])
def test_since_event_is_an_event_id_or_a_sequence(api, supervisor, since_event):
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url="https://hooks.example.org/x",
                                          event_types=["case.changed"])
    with assert_nothing_changed(extra={"deliveries": WebhookDelivery.objects.count}):
        response = api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/redeliver/", {"since_event": since_event},
                                        format="json")
    assert_error(response, 400, "invalid", fields={"since_event"})
    pattern = SINCE_EVENT_PATTERN
    assert not isinstance(since_event, str) or not re.search(pattern.replace("$", r"\Z"), since_event)


# --- an upload's fields are one part each -------------------------------------------------------------

def test_a_repeated_part_of_an_upload_is_refused(api, analyst, case):
    upload = SimpleUploadedFile("note.txt", b"text", content_type="text/plain")
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/evidence/upload/",
                                     {"title": "Note", "source": ["a", "b"], "file": upload}, format="multipart")
    assert_error(response, 400, "invalid", fields={"source"})


def test_max_length_counts_the_text_as_sent(api, analyst):
    """The schema's maxLength is the sent text's; the field trims after checking it."""
    with assert_nothing_changed(extra={"cases": Case.objects.count}):
        response = api(analyst).post("/api/v1/cases/", {"title": "   " + "t" * 298}, format="json")
    assert_error(response, 400, "invalid", fields={"title"})
    assert api(analyst).post("/api/v1/cases/", {"title": " " + "t" * 298 + " "}, format="json").status_code == 201


def test_an_enum_query_parameter_sent_empty_is_refused_as_the_schema_says(schema, api, supervisor):
    """No enum query parameter admits "" in the schema, and the server refuses `?kind=` as it
    refuses `?kind=nonsense`: a 400 naming the parameter and the choices; leaving it out filters
    nothing."""
    make_case(actor=supervisor)
    checked = []
    for path, operations in schema["paths"].items():
        if "{" in path or "get" not in operations:
            continue
        for parameter in operations["get"].get("parameters", []):
            if parameter.get("in") != "query" or "enum" not in parameter.get("schema", {}):
                continue
            assert "" not in parameter["schema"]["enum"], (path, parameter["name"])
            response = api(supervisor).get(path, {parameter["name"]: ""})
            assert response.status_code == 400, (path, parameter["name"], response.content)
            assert parameter["name"] in response.json().get("fields", {}) or parameter["name"] in str(response.json())
            checked.append(f"{path}?{parameter['name']}")
    assert len(checked) >= 15, checked
    assert api(supervisor).get("/api/v1/proposals/").status_code == 200
