"""Content negotiation: JSON for every Accept that does not ask for an HTML page first — successes
and errors — and the browsable API only for a browser (ADR 0022)."""

import pytest

from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db

JAVA_DEFAULT = "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2"
CHROME = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

JSON_ACCEPTS = [None, "*/*", "text/*", JAVA_DEFAULT, "application/json", "application/json, text/html",
                "text/html;q=0, */*", "text/html, */*;q=0.1", "image/png", "application/*", "*"]
HTML_ACCEPTS = ["text/html", CHROME, "text/html, application/xhtml+xml, */*;q=0.1"]


def _get(client, path, accept, **extra):
    if accept is not None:
        extra["HTTP_ACCEPT"] = accept
    return client.get(path, **extra)


@pytest.mark.parametrize("accept", JSON_ACCEPTS)
def test_json_for_a_success_and_for_errors(api, client, analyst, case, accept):
    response = _get(api(analyst), f"/api/v1/cases/{case.reference}/", accept)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json()["reference"] == case.reference
    assert_error(_get(api(analyst), "/api/v1/cases/NO-SUCH/", accept), 404, "not_found")
    assert _get(api(analyst), "/api/v1/cases/NO-SUCH/", accept)["Content-Type"] == "application/json"
    invalid = _get(api(analyst), "/api/v1/cases/?nonsense=1", accept)
    assert invalid["Content-Type"] == "application/json"
    assert_error(invalid, 400, "invalid", fields={"nonsense"})
    anonymous = _get(api(), "/api/v1/cases/", accept)
    assert anonymous["Content-Type"] == "application/json"
    assert_error(anonymous, 401, "not_authenticated")


@pytest.mark.parametrize("accept", HTML_ACCEPTS)
def test_the_browsable_api_for_a_browser(client, analyst, case, accept):
    client.force_login(analyst)
    response = client.get("/api/v1/cases/", HTTP_ACCEPT=accept)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert case.reference in response.content.decode()


def test_a_browser_navigation_with_a_wildcard_gets_the_page(client, analyst, case):
    client.force_login(analyst)
    response = client.get("/api/v1/cases/", HTTP_ACCEPT="text/html, */*", HTTP_SEC_FETCH_MODE="navigate")
    assert response["Content-Type"].startswith("text/html")
    response = client.get("/api/v1/cases/", HTTP_ACCEPT="text/html, */*")
    assert response["Content-Type"] == "application/json"


def test_the_schema_still_negotiates_its_own_formats(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200 and response.json()["info"]["title"] == "Arbiter API"
