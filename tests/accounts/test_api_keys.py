"""API keys: created (shown once, stored as sha256), revoked, expiring, bound to a tenant and a
service account whose role limits the key; Bearer authentication; Basic off by default; failed
authentications throttled per address and per key; created and revoked by manage.py and in the admin."""

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiKey, User
from accounts.services import api_key_create, api_key_revoke
from audit.models import AuditEvent
from core.errors import Conflict, Invalid
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_a_key_is_shown_once_and_stored_as_its_sha256(tenant):
    api_key, key = api_key_create(tenant=tenant, name="CRM sync", role="analyst")
    assert key.startswith(f"arb_{api_key.prefix}_") and len(key) > 50
    assert api_key.secret_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key not in str(ApiKey.objects.values().get())
    service = api_key.user
    assert (service.tenant, service.role, service.is_service_account, service.has_usable_password()) == (
        tenant, "analyst", True, False)
    event = AuditEvent.objects.get(action="accounts.api_key.created")
    assert key not in str(event.payload) and event.payload["prefix"] == api_key.prefix


def test_bearer_authenticates_as_the_service_account_and_records_last_use_at_most_once_a_minute(tenant):
    api_key, key = api_key_create(tenant=tenant, name="CRM", role="supervisor")
    body = bearer(key).get("/api/v1/me/").json()
    assert body["person"]["id"] == api_key.user_id and body["credential"] == "api_key"
    assert (body["tenant"], body["role"], body["api_key_name"]) == ("acme", "supervisor", "CRM")
    first = ApiKey.objects.get().last_used_at
    assert first is not None
    bearer(key).get("/api/v1/me/")
    assert ApiKey.objects.get().last_used_at == first  # not rewritten within the minute
    ApiKey.objects.update(last_used_at=first - timedelta(minutes=2))
    bearer(key).get("/api/v1/me/")
    assert ApiKey.objects.get().last_used_at > first


def test_revoked_and_expired_keys_are_401(tenant):
    revoked, revoked_key = api_key_create(tenant=tenant, name="old", role="analyst")
    api_key_revoke(api_key=revoked)
    assert User.objects.get(pk=revoked.user_id).is_active is False
    expiring, expiring_key = api_key_create(tenant=tenant, name="temp", role="analyst",
                                            expires_at=timezone.now() + timedelta(days=1))
    ApiKey.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for key in (revoked_key, expiring_key, revoked_key[:-2] + "xx"):
        response = bearer(key).get("/api/v1/cases/")
        assert response.status_code == 401 and response.json()["code"] == "authentication_failed"
        assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_revoking_twice_is_a_conflict_and_changes_nothing(tenant):
    api_key, _ = api_key_create(tenant=tenant, name="k", role="analyst")
    api_key_revoke(api_key=api_key)
    with assert_nothing_changed(extra={"keys": lambda: list(ApiKey.objects.values_list("revoked_at"))}), \
            pytest.raises(Conflict):
        api_key_revoke(api_key=api_key)


@pytest.mark.parametrize("name, role", [("", "analyst"), ("k", "overlord")])
def test_bad_key_requests_are_refused(tenant, name, role):
    with assert_nothing_changed(extra={"keys": ApiKey.objects.count, "users": User.objects.count}), \
            pytest.raises(Invalid):
        api_key_create(tenant=tenant, name=name, role=role)


def test_basic_auth_is_off_by_default(analyst):
    analyst.set_password("pw-123456")
    analyst.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + __import__("base64").b64encode(b"analyst:pw-123456").decode())
    assert client.get("/api/v1/cases/").status_code == 401


def test_the_setting_turns_basic_auth_on(monkeypatch):
    """ARBITER_API_BASIC_AUTH=1 adds HTTP Basic to the API's authentication classes (after Bearer,
    so a request without credentials still gets `WWW-Authenticate: Bearer`)."""
    import importlib

    from config.settings import api as project_settings  # the module of the API settings

    basic = "rest_framework.authentication.BasicAuthentication"
    assert basic not in project_settings.REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]
    monkeypatch.setenv("ARBITER_API_BASIC_AUTH", "1")
    monkeypatch.setenv("DEBUG", "1")
    try:
        classes = importlib.reload(project_settings).REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]
        assert classes[0] == "accounts.authentication.ApiKeyAuthentication" and basic in classes
    finally:
        monkeypatch.delenv("ARBITER_API_BASIC_AUTH")
        importlib.reload(project_settings)


def test_failed_authentications_are_throttled_per_address_but_never_refuse_another_valid_key(tenant, settings):
    settings.ARBITER_API_THROTTLE_AUTH_FAILURE = "3/minute"
    _, good_key = api_key_create(tenant=tenant, name="k", role="analyst")
    for _ in range(3):
        assert bearer("arb_nope_nope").get("/api/v1/cases/").status_code == 401
    response = bearer("arb_nope_nope").get("/api/v1/cases/")
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert response.json()["code"] == "throttled" and response["RateLimit-Remaining"] == "0"
    # The failures were another key's: a valid key from the same address is still accepted ...
    assert bearer(good_key).get("/api/v1/cases/").status_code == 200
    # ... another address's first failure with another key is a plain 401, but with the same key
    # (its prefix failed too often, wherever from) a 429.
    assert bearer("arb_else_nope").get("/api/v1/cases/", REMOTE_ADDR="10.0.0.9").status_code == 401
    assert bearer("arb_nope_nope").get("/api/v1/cases/", REMOTE_ADDR="10.0.0.9").status_code == 429


def test_the_command_creates_shows_once_lists_and_revokes(tenant):
    out = StringIO()
    call_command("api_key", "create", "ERP", "--tenant", "acme", "--role", "supervisor", "--expires-days", "30",
                 stdout=out)
    key = out.getvalue().strip().splitlines()[-1]
    api_key = ApiKey.objects.get()
    assert key.startswith(f"arb_{api_key.prefix}_") and api_key.user.role == "supervisor"
    assert api_key.expires_at > timezone.now() + timedelta(days=29)
    assert bearer(key).get("/api/v1/me/").status_code == 200
    listing = StringIO()
    call_command("api_key", "list", stdout=listing)
    assert api_key.prefix in listing.getvalue() and key not in listing.getvalue()
    call_command("api_key", "revoke", api_key.prefix, stdout=StringIO())
    assert bearer(key).get("/api/v1/me/").status_code == 401
    with pytest.raises(CommandError):
        call_command("api_key", "create", "x", "--tenant", "nowhere", "--role", "analyst", stdout=StringIO())


def test_the_admin_creates_a_key_shows_it_once_and_revokes_it(client, admin_user):
    client.force_login(admin_user)
    response = client.post("/admin/accounts/apikey/add/", {"name": "Zapier", "role": "analyst", "expires_at": ""},
                           follow=True)
    assert response.status_code == 200
    api_key = ApiKey.objects.get()
    shown = [str(m) for m in response.context["messages"]]
    assert any(f"arb_{api_key.prefix}_" in m for m in shown)
    assert api_key.tenant_id == admin_user.tenant_id and api_key.created_by == admin_user
    client.post("/admin/accounts/apikey/", {"action": "revoke_keys", "_selected_action": [api_key.pk]})
    assert ApiKey.objects.get().revoked_at is not None


def test_a_key_of_another_tenant_sees_nothing_of_ours(case, other_tenant):
    _, key = api_key_create(tenant=other_tenant, name="theirs", role="supervisor")
    assert bearer(key).get(f"/api/v1/cases/{case.reference}/").status_code == 404
    assert bearer(key).get("/api/v1/cases/").json()["results"] == []
