"""Unknown body fields are a 400 naming them (like unknown query parameters) and change nothing;
every answer under /api/ carries Arbiter-API-Version; CORS by an origin allowlist (ADR 0022)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cases.models import Case
from core.schema_view import schema_cache_clear
from integrations.models import WebhookEndpoint
from tests.api.conftest import assert_error
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db

ORIGIN = "https://app.example.com"
ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_body_field_is_a_400_naming_it_and_changes_nothing(api, analyst, case):
    body = {"transition": "triage", "colour": "red", "priority": 1}
    with assert_nothing_changed(case):
        response = api(analyst).post(f"/api/v1/cases/{case.reference}/transitions/", body, format="json")
    answer = assert_error(response, 400, "invalid", fields={"colour", "priority"})
    assert "Unknown field" in answer["fields"]["colour"][0] and "transition" in answer["fields"]["colour"][0]
    response = api(analyst).post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "triage"},
                                 format="json")
    assert response.status_code == 200


def test_unknown_fields_on_create_and_patch(api, supervisor, analyst):
    with assert_nothing_changed(extra={"cases": lambda: Case.objects.count()}):
        response = api(analyst).post("/api/v1/cases/", {"title": "T", "complainant_name": "A", "nonsense": 1},
                                     format="json")
    assert_error(response, 400, "invalid", fields={"nonsense"})
    endpoint = WebhookEndpoint.objects.create(tenant=supervisor.tenant, url="https://hooks.example.com/x",
                                              event_types=["case.changed"], secret="whsec_x", created_by=supervisor)
    with assert_nothing_changed(extra={"endpoint": lambda: WebhookEndpoint.objects.values().get(pk=endpoint.pk)}):
        response = api(supervisor).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"is_active": False, "secret": "mine"},
                                         format="json")
    assert_error(response, 400, "invalid", fields={"secret"})


def test_the_schema_and_the_check_agree_on_the_fields(client):
    schema_cache_clear()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    body = schema["paths"]["/api/v1/cases/{reference}/transitions/"]["post"]["requestBody"]
    reference = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    component = schema["components"]["schemas"][reference]
    assert set(component["properties"]) == {"transition", "expected_version", "reason", "confirm_reason"}
    assert component["additionalProperties"] is False


@pytest.mark.parametrize("path", ["/api/v1/cases/", "/api/v1/nothing-here/", "/api/schema/"])
def test_every_api_answer_names_the_version(api, analyst, path):
    response = api(analyst).get(path)
    assert response["Arbiter-API-Version"] == "1"
    assert api().get("/api/v1/cases/")["Arbiter-API-Version"] == "1"  # errors too (401)


def test_pages_outside_the_api_carry_no_version(client):
    assert not client.get("/accounts/login/").has_header("Arbiter-API-Version")


def _preflight(client, origin):
    return client.options("/api/v1/cases/", HTTP_ORIGIN=origin, HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
                          HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type, idempotency-key")


def test_a_preflight_from_an_allowed_origin_gets_the_cors_headers_not_401(client, settings):
    settings.CORS_ALLOWED_ORIGINS = [ORIGIN]
    response = _preflight(client, ORIGIN)
    assert response.status_code in (200, 204)
    assert response["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in response["Access-Control-Allow-Methods"]
    assert "idempotency-key" in response["Access-Control-Allow-Headers"]
    assert not response.has_header("Access-Control-Allow-Credentials")


def test_another_origin_gets_no_cors_headers(client, api, analyst, settings):
    settings.CORS_ALLOWED_ORIGINS = [ORIGIN]
    response = _preflight(client, "https://evil.example.net")
    assert not response.has_header("Access-Control-Allow-Origin")
    response = api(analyst).get("/api/v1/cases/", HTTP_ORIGIN="https://evil.example.net")
    assert response.status_code == 200 and not response.has_header("Access-Control-Allow-Origin")


def test_by_default_no_origin_is_allowed(client, settings):
    assert settings.CORS_ALLOWED_ORIGINS == []
    assert not _preflight(client, ORIGIN).has_header("Access-Control-Allow-Origin")


def test_an_allowed_origin_reads_the_headers_a_client_needs(api, analyst, settings):
    settings.CORS_ALLOWED_ORIGINS = [ORIGIN]
    response = api(analyst).get("/api/v1/cases/", HTTP_ORIGIN=ORIGIN)
    assert response["Access-Control-Allow-Origin"] == ORIGIN
    exposed = response["Access-Control-Expose-Headers"].lower()
    assert {"etag", "location", "retry-after", "arbiter-api-version"} <= {h.strip() for h in exposed.split(",")}


@pytest.mark.slow  # starts manage.py
@pytest.mark.engine_independent  # `check` reads settings, never the suite's database
def test_a_malformed_allowed_origin_stops_the_start(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "ARBITER_CORS_ALLOWED_ORIGINS"}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env=env | {"DEBUG": "1", "ARBITER_VAR_DIR": str(tmp_path),
                                                    "ARBITER_CORS_ALLOWED_ORIGINS": "app.example.com"})
    assert result.returncode != 0 and "ARBITER_CORS_ALLOWED_ORIGINS: 'app.example.com' is not an origin" in (
        result.stderr)
