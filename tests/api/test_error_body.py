"""Every API error has the same body: {code, detail, fields?}."""

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def api(analyst):
    client = APIClient()
    client.force_authenticate(analyst)
    return client


def test_malformed_json_is_a_parse_error_not_a_field_error(api, case):
    response = api.post(f"/api/v1/cases/{case.reference}/transitions/", data="{not json",
                        content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert "JSON parse error" in response.json()["detail"]
    assert "fields" not in response.json()


def test_unauthenticated_request_has_the_same_body(case):
    response = APIClient().get("/api/v1/cases/")
    assert response.status_code in (401, 403)
    assert response.json()["code"] in {"not_authenticated", "authentication_failed"}
    assert response.json()["detail"]
