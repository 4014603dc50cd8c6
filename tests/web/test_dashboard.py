"""The supervisor's dashboard page, its CSV and its links (numbers: tests/reports/scenario.py)."""

import csv
import html
import io
import re
from datetime import date, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from cases import policy
from reports.models import CaseFact, DashboardRefresh
from reports.services import dashboard_refresh
from tests.factories import make_case
from tests.helpers import assert_nothing_changed
from tests.reports import scenario
from tests.reports.scenario import TODAY

LINK = re.compile(r'<a href="([^"]+)">(\d+)</a>')


@pytest.fixture
def today(monkeypatch):
    """The scenario's today for the page and the queue alike (a given moment keeps its own date)."""
    localdate = timezone.localdate
    monkeypatch.setattr(timezone, "localdate", lambda value=None, timezone=None: (
        TODAY if value is None else localdate(value)))
    return TODAY


@pytest.fixture
def refreshed(tenant, analyst, analyst_b, today):
    cases = scenario.build(analyst=analyst, analyst_b=analyst_b)
    dashboard_refresh(tenant_id=tenant.pk)
    return cases


def page(client, user, **params):
    client.force_login(user)
    return client.get(reverse("web:dashboard"), params)


def numbers_and_links(response) -> list[tuple[str, int]]:
    return [(html.unescape(href), int(number)) for href, number in LINK.findall(response.content.decode())]


@pytest.mark.parametrize("role_user", ["supervisor", "auditor", "admin_user"])
def test_the_roles_that_oversee_the_work_see_the_dashboard(client, request, role_user, refreshed):
    response = page(client, request.getfixturevalue(role_user))
    assert response.status_code == 200
    assert b"<h1>Dashboard</h1>" in response.content


def test_an_analyst_gets_403_and_nothing_changes(client, analyst, refreshed):
    client.force_login(analyst)
    with assert_nothing_changed(*refreshed.values(), extra={"facts": CaseFact.objects.count}):
        for url in (reverse("web:dashboard"), reverse("web:dashboard_export"),
                    reverse("web:dashboard_agent_outputs", args=["proposal"]) + "?agent=agent:proposer@1&outcome=applied"):
            response = client.get(url)
            assert response.status_code == 403
            assert b"open to supervisors, auditors and administrators" in response.content


def test_the_dashboard_link_is_in_the_navigation_only_for_those_roles(client, analyst, supervisor, refreshed):
    client.force_login(analyst)
    assert b'href="/dashboard/"' not in client.get(reverse("web:case_list")).content
    client.force_login(supervisor)
    assert b'href="/dashboard/"' in client.get(reverse("web:case_list")).content


def test_the_page_shows_the_hand_worked_numbers_with_their_links(client, supervisor, analyst, refreshed):
    links = numbers_and_links(page(client, supervisor))
    assert (f"/?open=1&due=overdue&assignee={analyst.pk}", 1) in links
    assert ("/?open=1&deadline=acknowledge&due=overdue", 1) in links
    assert ("/?open=1&deadline=close&due=this_week", 1) in links
    assert ("/?month=2026-01&sla=acknowledge_missed", 1) in links
    assert ("/?month=2026-01", 2) in links
    assert ("/?decided_in=61-", 1) in links


def test_the_page_says_how_old_the_rolled_up_numbers_are(client, supervisor, refreshed, tenant, settings):
    settings.ARBITER_DASHBOARD_REFRESH_SECONDS = 1800
    DashboardRefresh.objects.filter(tenant=tenant).update(refreshed_at=timezone.now() - timedelta(minutes=7))
    text = html.unescape(page(client, supervisor).content.decode()).replace("\xa0", " ")
    assert "(7 minutes ago; they are counted again every 30 minutes," in text


def test_every_number_links_to_a_list_of_exactly_that_many(client, supervisor, refreshed):
    links = numbers_and_links(page(client, supervisor))
    assert len(links) > 40
    for href, number in links:
        response = client.get(href)
        assert response.status_code == 200, href
        assert response.context["total"] == number, href


def test_filters_narrow_every_section(client, supervisor, refreshed):
    links = numbers_and_links(page(client, supervisor, team="Cards", month="2026-01"))
    assert ("/?team=Cards&month=2026-01&open=1&deadline=acknowledge&due=overdue", 1) in links
    assert ("/?team=Cards&month=2026-01&sla=answer_met", 1) in links
    for href, number in links:
        assert client.get(href).context["total"] == number, href


def test_an_invalid_filter_is_a_400_that_says_what_to_fix(client, supervisor, refreshed):
    response = page(client, supervisor, month="March")
    assert response.status_code == 400
    assert b"Give the month as year and month, e.g. 2026-03." in response.content
    response = page(client, supervisor, team="No such team")
    assert response.status_code == 400
    client.force_login(supervisor)
    assert client.get(reverse("web:dashboard_export"), {"month": "2026-13"}).status_code == 400
    assert client.get(reverse("web:case_list"), {"month": "13"}).status_code == 400


def test_csv_export_has_the_same_numbers(client, supervisor, refreshed):
    client.force_login(supervisor)
    response = client.get(reverse("web:dashboard_export"), {"team": "Cards"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["section", "group", "measure", "value"]
    assert ["workload per analyst", "analyst", "open", "1"] in rows
    assert ["workload per analyst", "analyst", "overdue", "1"] in rows
    assert ["due dates", "Final response", "due this week", "1"] in rows
    assert ["service levels", "2025-12", "answer missed", "1"] in rows
    assert ["service levels", "2026-01", "acknowledge met %", "50"] in rows
    assert ["time to decision", "all decided", "mean days", "50.0"] in rows
    assert ["agent proposals", "Proposer (version 1) / Risk level", "applied", "1"] in rows
    assert ["agent disputes", "Adjudicator (version 1)", "unresolved", "1"] in rows
    assert not any(row[1] == "analyst_b" for row in rows)  # Mortgages is filtered out


def test_agent_outputs_list_the_rows_counted(client, supervisor, refreshed):
    client.force_login(supervisor)
    url = reverse("web:dashboard_agent_outputs", args=["notice"])
    response = client.get(url, {"agent": "agent:notice_drafter@1", "outcome": "approved_after_edit"})
    assert response.status_code == 200 and response.context["total"] == 1
    assert refreshed["C"].reference in response.content.decode()
    assert client.get(url, {"agent": "agent:notice_drafter@1", "outcome": "nonsense"}).status_code == 404
    assert client.get(reverse("web:dashboard_agent_outputs", args=["memory"]),
                      {"agent": "x", "outcome": "pending"}).status_code == 404


def test_another_tenant_supervisor_sees_no_number_of_this_one(client, outsider, refreshed):
    links = numbers_and_links(page(client, outsider))
    assert all(number == 0 for _href, number in links)


def test_query_count_does_not_grow_with_the_data(client, supervisor, analyst, refreshed, django_assert_max_num_queries,
                                                 tenant):
    client.force_login(supervisor)
    client.get(reverse("web:dashboard"))  # warm the session and the caches
    with CaptureQueriesContext(connection) as small:
        assert client.get(reverse("web:dashboard")).status_code == 200
    for n in range(6):
        make_case(actor=analyst, title=f"More work {n}", received_at=date(2026, 3, 2))
    dashboard_refresh(tenant_id=tenant.pk)
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert client.get(reverse("web:dashboard")).status_code == 200
    assert len(small.captured_queries) <= 16


@pytest.mark.parametrize("role_user", ["analyst", "supervisor", "auditor", "admin_user"])
def test_the_navigation_and_the_view_follow_one_role_rule(request, role_user):
    user = request.getfixturevalue(role_user)
    assert user.can_see_dashboard == (user.role in policy.CAN_SEE_DASHBOARD)
