"""Deadlocks outside web/urls.py: logging in, logging out and the admin site run again after
PostgreSQL aborts them for a lock conflict, as every page's writes do (web.retries). The deadlock is
a real deadlock_detected error raised inside the request, after it has written; the answer is the
one the request gives without the fault, and what is stored is the second attempt's only."""

from __future__ import annotations

import pytest
from axes.models import AccessLog
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accounts.admin import ApiKeyAdmin
from accounts.models import ApiKey
from audit.models import AuditEvent
from cases.models import ProposalStatus
from tests.factories import make_case
from tests.web.test_retries import RAISE_DEADLOCK, _proposal, reject_deadlocking_once_on

PASSWORD = "pw-for-tests"  # tests.factories.UserFactory


def _deadlock_on(signal, *, times: int) -> list[int]:
    """Connect a receiver to `signal` that raises a real deadlock on its first `times` calls."""
    calls: list[int] = []

    def receiver(**kwargs):
        calls.append(1)
        if len(calls) <= times:
            with connection.cursor() as cursor:
                cursor.execute(RAISE_DEADLOCK)

    signal.connect(receiver, weak=False, dispatch_uid="test-deadlock")
    return calls


@pytest.fixture
def disconnect_deadlocks():
    yield
    user_logged_in.disconnect(dispatch_uid="test-deadlock")
    user_logged_out.disconnect(dispatch_uid="test-deadlock")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_login_met_by_a_deadlock_once_is_retried_and_logs_in(analyst, disconnect_deadlocks):
    calls = _deadlock_on(user_logged_in, times=1)  # after the session and the last login were written
    client = Client()
    response = client.post(reverse("login"), {"username": "analyst", "password": PASSWORD})
    assert len(calls) == 2
    assert response.status_code == 302 and response["Location"] == reverse("web:case_list")
    assert client.session["_auth_user_id"] == str(analyst.pk)
    assert client.get(reverse("web:case_list")).status_code == 200
    analyst.refresh_from_db()
    assert analyst.last_login is not None
    assert AccessLog.objects.filter(username="analyst").count() == 1  # the aborted attempt's log row is gone


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_login_met_by_a_deadlock_every_time_is_a_503_page_and_nothing_is_stored(analyst, disconnect_deadlocks):
    calls = _deadlock_on(user_logged_in, times=99)
    client = Client()
    response = client.post(reverse("login"), {"username": "analyst", "password": PASSWORD})
    assert len(calls) == 3  # bounded
    assert response.status_code == 503 and response["Retry-After"] == "1"
    page = response.content.decode()
    assert "Arbiter is busy" in page and "nothing was changed" in page and "Traceback" not in page
    assert "_auth_user_id" not in client.session
    analyst.refresh_from_db()
    assert analyst.last_login is None
    assert not AccessLog.objects.filter(username="analyst").exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_logout_met_by_a_deadlock_once_is_retried_and_logs_out(analyst, disconnect_deadlocks):
    client = Client()
    client.force_login(analyst)
    calls = _deadlock_on(user_logged_out, times=1)
    response = client.post(reverse("logout"))
    assert len(calls) == 2
    assert response.status_code in (200, 302)
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("web:case_list")).status_code == 302  # to the login page


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_admin_page_met_by_a_deadlock_once_stores_and_says_only_the_second_attempt(admin_user, monkeypatch):
    """Adding an API key in the admin: the first attempt created a key and queued its secret in a
    message before the deadlock; the person sees one key, the one stored."""
    calls: list[int] = []

    def log_addition_deadlocks_once(self, request, obj, message):
        calls.append(1)
        if len(calls) == 1:
            with connection.cursor() as cursor:
                cursor.execute(RAISE_DEADLOCK)

    monkeypatch.setattr(ApiKeyAdmin, "log_addition", log_addition_deadlocks_once)
    client = Client()
    client.force_login(admin_user)
    response = client.post(reverse("admin:accounts_apikey_add"), {"name": "CRM sync", "role": "analyst",
                                                                    "expires_at": ""})
    assert len(calls) == 2
    assert response.status_code == 302
    key = ApiKey.objects.get()
    assert key.name == "CRM sync"
    assert AuditEvent.objects.filter(action="accounts.api_key.created").count() == 1
    shown = [str(m) for m in get_messages(response.wsgi_request) if "shown only this once" in str(m)]
    assert len(shown) == 1 and f"arb_{key.prefix}_" in shown[0]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_admin_bulk_action_retries_only_the_row_that_met_the_deadlock(monkeypatch, agent, supervisor):
    supervisor.is_staff = True
    supervisor.save()
    first, second = make_case(actor=supervisor, title="First"), make_case(actor=supervisor, title="Second")
    proposals = [_proposal(agent, first), _proposal(agent, second)]
    calls = reject_deadlocking_once_on(monkeypatch, proposals[1].pk)
    client = Client()
    client.force_login(supervisor)
    response = client.post(reverse("admin:cases_proposal_changelist"),
                           {"action": "reject_proposals", "_selected_action": [p.pk for p in proposals],
                            "reason": "Not convinced."}, follow=True)
    assert response.status_code == 200
    assert sorted(calls) == sorted([proposals[0].pk, proposals[1].pk, proposals[1].pk])  # the first row once
    for proposal in proposals:
        proposal.refresh_from_db()
        assert proposal.status == ProposalStatus.REJECTED
    page = response.content.decode()
    assert "Rejected:" in page and "busy" not in page.lower()


def _all_patterns(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _all_patterns(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern


def test_login_logout_and_every_admin_view_retry_their_writes():
    routes = [(route, p) for route, p in _all_patterns(get_resolver().url_patterns)
              if route.startswith(("admin/", "accounts/")) and isinstance(p, URLPattern)]
    assert len(routes) > 100
    unwrapped = [route for route, p in routes if not (getattr(p.callback, "retried_on_deadlock", False)
                                                       or getattr(p.callback, "retries_each_change", False))]
    assert unwrapped == []
    each_change = [p.name for _route, p in routes if getattr(p.callback, "retries_each_change", False)]
    assert each_change and all(name.endswith("_changelist") for name in each_change)
    assert {"login", "logout"} <= {p.name for _route, p in routes}
