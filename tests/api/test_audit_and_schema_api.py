"""/api/v1/audit-events/ (role-restricted), the OpenAPI schema and the offline API docs."""

import re

import pytest
from django.core.management import call_command

from audit.models import AuditEvent
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("persona", ["auditor", "supervisor", "admin_user"])
def test_audit_events_are_listed_for_roles_that_may_see_them(api, request, persona, case):
    body = api(request.getfixturevalue(persona)).get("/api/v1/audit-events/").json()
    assert len(body["results"]) == 2
    event = body["results"][0]
    stored = AuditEvent.objects.get(pk=event["id"])
    assert event["hash"] == stored.hash and event["policy_version"] == stored.policy_version
    assert event["action"] == "cases.evidence.added"  # newest first


def test_an_analyst_is_refused_the_audit_log(api, analyst, case):
    with assert_nothing_changed(case):
        response = api(analyst).get("/api/v1/audit-events/")
    assert "auditors, supervisors and administrators" in assert_error(response, 403, "forbidden")["detail"]


def test_audit_events_filter_by_action_and_case(api, auditor, analyst, case):
    other = make_case(actor=analyst, title="Other")
    client = api(auditor)
    assert len(client.get("/api/v1/audit-events/").json()["results"]) == 4
    actions = {e["action"] for e in client.get("/api/v1/audit-events/?action=cases.case").json()["results"]}
    assert actions == {"cases.case.created"}
    streams = {e["stream"] for e in client.get(f"/api/v1/audit-events/?case={other.reference}").json()["results"]}
    assert streams == {f"case:{other.pk}"}


def test_audit_events_are_tenant_scoped(api, outsider, case):
    assert len(api(outsider).get("/api/v1/audit-events/").json()["results"]) == 0
    assert_error(api(outsider).get(f"/api/v1/audit-events/?case={case.reference}"), 404, "not_found")


def test_the_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    text = (tmp_path / "schema.yml").read_text()
    assert "/api/v1/cases/{reference}/transitions/:" in text and "/api/v1/audit-events/:" in text


def test_the_schema_is_served(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["info"]["title"] == "Arbiter API"
    assert "/api/v1/notices/{id}/approve/" in schema["paths"]
    parameters = {p["name"] for p in schema["paths"]["/api/v1/cases/"]["get"]["parameters"]}
    assert {"status", "risk_level", "search", "cursor", "page_size", "ordering", "updated_since"} <= parameters


def test_the_docs_page_needs_no_external_url(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    external = [u for u in re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", html) if re.match(r"(https?:)?//", u)]
    assert external == [], external
    assert "/static/drf_spectacular_sidecar/" in html
    assert "cdn" not in html.lower()


def test_the_browsable_api_renders_for_a_person(client, analyst, case):
    client.force_login(analyst)
    response = client.get("/api/v1/cases/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200 and case.reference in response.content.decode()


def test_an_unknown_api_address_is_a_json_404(api, analyst):
    assert_error(api(analyst).get("/api/v1/nothing-here/"), 404, "not_found")
