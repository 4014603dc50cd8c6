"""/api/schema/ is generated once per process and then served from memory, in JSON and YAML."""

import time

import pytest
from drf_spectacular.generators import SchemaGenerator

from core.schema_view import schema_cache_clear

pytestmark = pytest.mark.django_db

OPENAPI_JSON = "application/vnd.oai.openapi+json"


@pytest.fixture
def generations(monkeypatch):
    schema_cache_clear()
    calls = []
    real = SchemaGenerator.get_schema

    def counted(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counted)
    yield calls
    schema_cache_clear()


def test_the_schema_is_generated_once_for_many_requests(client, generations):
    first = client.get("/api/schema/", HTTP_ACCEPT=OPENAPI_JSON)
    started = time.perf_counter()
    second = client.get("/api/schema/", HTTP_ACCEPT=OPENAPI_JSON)
    elapsed = time.perf_counter() - started
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and second["Content-Type"].startswith(OPENAPI_JSON)
    assert second.json()["info"]["title"] == "Arbiter API"
    assert len(generations) == 1
    assert elapsed < 0.05, f"the second request took {elapsed * 1000:.0f} ms"


def test_each_format_is_rendered_from_the_one_schema(client, generations):
    as_json = client.get("/api/schema/", HTTP_ACCEPT=OPENAPI_JSON)
    as_yaml = client.get("/api/schema/")
    again = client.get("/api/schema/")
    assert as_json["Content-Type"].startswith(OPENAPI_JSON)
    assert as_yaml["Content-Type"].startswith("application/vnd.oai.openapi") and b"openapi: 3" in as_yaml.content
    assert again.content == as_yaml.content and again["Content-Type"] == as_yaml["Content-Type"]
    assert len(generations) == 1


def test_a_settings_change_forgets_the_schema(client, generations, settings):
    client.get("/api/schema/", HTTP_ACCEPT=OPENAPI_JSON)
    settings.ARBITER_API_PAGE_SIZE = 7
    client.get("/api/schema/", HTTP_ACCEPT=OPENAPI_JSON)
    assert len(generations) == 2
