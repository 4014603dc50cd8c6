from unittest import mock

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def api():
    """`api(user)` -> an APIClient authenticated as `user` (None: anonymous)."""

    def make(user=None):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture
def queued():
    """The Celery enqueue of notice dispatches, captured instead of sent to a broker."""
    with mock.patch("cases.tasks.notice_dispatch_task.delay") as delay:
        yield delay


def assert_error(response, status: int, code: str, *, fields: set[str] | None = None) -> dict:
    """A refusal has the one error body of the API: {code, detail, fields?}."""
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code and body["detail"], body
    assert set(body) <= {"code", "detail", "fields"}
    if fields is not None:
        assert set(body.get("fields", {})) == fields, body
    return body


@pytest.fixture(autouse=True)
def _fresh_throttles(request):
    """Rate-limit counters live in the cache: each test starts with none. Without CACHE_URL the
    cache is a database table: tests with database access clear it once their database is set up
    (what a test writes there is rolled back with it, or cleared by the next test)."""
    from django.core.cache import caches

    cache = caches["default"]
    if "DatabaseCache" not in type(cache).__name__:
        cache.clear()
        yield
        cache.clear()
        return
    marker = request.node.get_closest_marker("django_db")
    names = set(request.fixturenames)
    if marker is not None or {"db", "transactional_db", "live_server"} & names:
        transactional = bool({"transactional_db", "live_server"} & names) or bool(
            marker is not None and marker.kwargs.get("transaction"))
        request.getfixturevalue("transactional_db" if transactional else "db")
        cache.clear()
    yield


@pytest.fixture
def make_key(tenant):
    """`make_key(role, tenant=None)` -> (ApiKey, plaintext) created through the service."""
    from accounts.services import api_key_create

    def make(role: str, *, tenant_=None, name: str | None = None):
        return api_key_create(tenant=tenant_ or tenant, name=name or f"{role} integration", role=role)

    return make


@pytest.fixture
def bearer():
    """`bearer(key)` -> an APIClient sending `Authorization: Bearer <key>` (no session, no CSRF exemption)."""

    def make(key: str):
        client = APIClient(enforce_csrf_checks=True)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return make
