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
def _fresh_throttles():
    """Rate-limit counters live in the cache: each test starts with none."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


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
