"""Login throttling with lockout (django-axes), audited: after AXES_FAILURE_LIMIT wrong
passwords — on the login page or with HTTP Basic on the API — the right password is refused
too, until the cool-off lapses; the lockout is one audit event."""

import base64

import pytest
from django.db.models import F
from django.urls import reverse

from audit.models import AuditEvent
from ops.security import LOCKOUT_ACTION

pytestmark = pytest.mark.django_db

RIGHT = "pw-for-tests"  # tests.factories.UserFactory


def _lapse_cool_off(settings) -> None:
    """Time passes: every recorded failure becomes older than the cool-off."""
    from axes.models import AccessAttempt

    AccessAttempt.objects.update(attempt_time=F("attempt_time") - settings.AXES_COOLOFF_TIME)


def _basic(username: str, password: str) -> dict:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def _login(client, username, password):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_the_login_form_locks_out_after_repeated_wrong_passwords_until_the_cool_off_lapses(client, analyst,
                                                                                            settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    statuses = [_login(client, "analyst", "wrong").status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]  # the form again, then the lockout

    refused = _login(client, "analyst", RIGHT)
    assert refused.status_code == 429
    assert "_auth_user_id" not in client.session
    assert refused.content.decode().startswith("Too many failed logins for this account")
    assert refused["Retry-After"] == str(15 * 60)

    event = AuditEvent.objects.get(action=LOCKOUT_ACTION)
    assert (event.tenant_id, event.target_type, event.target_id, event.actor_id) == (
        analyst.tenant_id, "user", str(analyst.pk), "system:axes")
    assert event.payload["username"] == "analyst" and event.payload["ip_address"] == "127.0.0.1"
    assert event.payload["failures"] == 5

    _lapse_cool_off(settings)
    accepted = _login(client, "analyst", RIGHT)
    assert accepted.status_code == 302
    assert client.session["_auth_user_id"] == str(analyst.pk)
    assert AuditEvent.objects.filter(action=LOCKOUT_ACTION).count() == 1  # one lockout, one event


def test_http_basic_on_the_api_locks_out_too_and_refuses_the_right_password(client, analyst, settings, monkeypatch):
    # Basic auth is off by default (ARBITER_API_BASIC_AUTH); turn it on for the API views as that
    # setting does (DRF binds the classes to APIView when it is imported, so patch them there).
    from rest_framework.authentication import BasicAuthentication
    from rest_framework.views import APIView

    monkeypatch.setattr(APIView, "authentication_classes", [*APIView.authentication_classes, BasicAuthentication])
    url = "/api/v1/cases/"
    assert client.get(url, **_basic("analyst", RIGHT)).status_code == 200
    statuses = [client.get(url, **_basic("analyst", "wrong")).status_code for _ in range(5)]
    assert statuses[:4] == [401] * 4 or statuses[:4] == [403] * 4, statuses
    assert statuses[4] == 429

    refused = client.get(url, **_basic("analyst", RIGHT))
    assert refused.status_code == 429
    assert refused.json()["code"] == "locked_out"
    assert "X-Request-ID" in refused
    assert AuditEvent.objects.filter(action=LOCKOUT_ACTION, target_id=str(analyst.pk)).count() == 1

    _lapse_cool_off(settings)
    assert client.get(url, **_basic("analyst", RIGHT)).status_code == 200


def test_a_lockout_is_per_username_and_address_so_others_still_log_in(client, analyst, analyst_b):
    for _ in range(5):
        _login(client, "analyst", "wrong")
    assert _login(client, "analyst_b", RIGHT).status_code == 302
