"""Every list page reads the same number of queries at two data sizes: the query count
of a page depends on what it shows, never on how much there is. Times are the benchmark's
(bench/ui_at_scale.py); counts are asserted here."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from cases import services
from runs.models import AgentRun
from tests.factories import make_case

pytestmark = pytest.mark.django_db


def grow(*, analyst, analyst_b, supervisor, agent, start: int, count: int) -> None:
    """`count` more cases with every kind of item the lists show."""
    for n in range(start, start + count):
        case = make_case(actor=analyst, title=f"Hazard insurance case {n}",
                         narrative=f"The servicer lost my hazard insurance check number {n}.")
        if n % 2:
            services.case_take(actor=analyst_b if n % 4 == 1 else analyst, case=case)
        services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                 rationale="Loss.")
        notice = services.notice_draft(actor=analyst, case=case, subject=f"Notice {n}", body=f"Text {n}.")
        services.notice_submit(actor=analyst, notice=notice)
        if n % 3 == 1:
            services.notice_reject(actor=supervisor, notice=notice, note="Say more.")
        elif n % 3 == 2:
            services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
        AgentRun.objects.create(tenant=case.tenant, case=case, graph="case_analysis", status="completed",
                                max_steps=50, max_tokens=1000, max_wall_seconds=60, started_by=f"user:{analyst.pk}",
                                started_by_user=analyst, provider_name="offline", queued_at=timezone.now())


PAGES = [
    ("analyst", "web:case_list", ""), ("analyst", "web:case_list", "?view=mine"),
    ("supervisor", "web:case_list", "?view=decide"), ("analyst", "web:case_list", "?view=unassigned"),
    ("analyst", "web:case_list", "?q=hazard+insurance"), ("analyst", "web:case_list", "?sort=-risk&pending=on"),
    ("analyst", "web:case_list", "?sort=received&product=credit+card&tag=x"),
    ("supervisor", "web:review_inbox", ""), ("supervisor", "web:review_inbox", "?section=approved"),
    ("analyst", "web:review_inbox", "?section=rejected"), ("supervisor", "web:review_inbox", "?kind=notice"),
    ("auditor", "web:audit_timeline", ""), ("auditor", "web:audit_timeline", "?scope=all"),
    ("auditor", "web:audit_timeline", "?decision=approved&action=cases.notice"),
    ("analyst", "web:run_list", ""), ("analyst", "web:run_list", "?status=completed"),
]


def count_queries(client, user, url) -> int:
    client.force_login(user)
    client.get(url)  # the session is written once; count a steady-state request
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries)


def test_every_list_reads_the_same_queries_at_two_sizes(client, request, analyst, analyst_b, supervisor, auditor,
                                                        agent):
    people = {"analyst": analyst, "supervisor": supervisor, "auditor": auditor}
    grow(analyst=analyst, analyst_b=analyst_b, supervisor=supervisor, agent=agent, start=0, count=3)
    small = {(who, name, query): count_queries(client, people[who], reverse(name) + query)
             for who, name, query in PAGES}
    # More than a page of everything: 30 cases, 30 proposals, 30 notices, 30 runs, ~300 audit events.
    grow(analyst=analyst, analyst_b=analyst_b, supervisor=supervisor, agent=agent, start=3, count=30)
    large = {(who, name, query): count_queries(client, people[who], reverse(name) + query)
             for who, name, query in PAGES}
    assert large == small
    assert max(small.values()) <= 10, small


def test_the_case_page_reads_the_same_queries_in_a_bigger_tenant(client, analyst, analyst_b, supervisor, agent):
    grow(analyst=analyst, analyst_b=analyst_b, supervisor=supervisor, agent=agent, start=0, count=2)
    case = make_case(actor=analyst, title="The one we look at")
    url = reverse("web:case_detail", args=[case.reference])
    before = count_queries(client, analyst, url)
    grow(analyst=analyst, analyst_b=analyst_b, supervisor=supervisor, agent=agent, start=2, count=20)
    assert count_queries(client, analyst, url) == before
