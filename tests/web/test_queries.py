"""The case queue and the case page read a bounded number of queries, however much data."""

import pytest
from django.urls import reverse

from cases import services
from tests.factories import make_case

pytestmark = pytest.mark.django_db


def _busy_case(*, analyst, supervisor, agent, n: int):
    case = make_case(actor=analyst, title="A case with a long history")
    for i in range(n):
        services.evidence_add(actor=analyst, case=case, title=f"Note {i}", text=f"Fact number {i}.")
        proposal = services.proposal_create(actor=agent, case=case, kind="assignment",
                                            payload={"team": f"team-{i}", "assignee_id": analyst.pk},
                                            rationale="Workload.")
        services.proposal_reject(actor=supervisor, proposal=proposal, note="Not now.")
        notice = services.notice_draft(actor=analyst, case=case, subject=f"Update {i}", body="We are on it.")
        services.notice_submit(actor=analyst, notice=notice)
        if i % 2:
            services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
        else:
            services.notice_reject(actor=supervisor, notice=notice, note="Too short.")
    services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Loss.")
    return case


def test_case_queue_query_count_does_not_grow_with_cases(client, analyst, agent, django_assert_max_num_queries):
    for i in range(40):
        case = make_case(actor=analyst, title=f"Complaint {i}", narrative="")
        services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "low"},
                                 rationale="Small.")
    client.force_login(analyst)
    # session, user, tenant (page header), the assignee filter's people, saved views, a
    # capped count, one page of cases with pending counts and assignees
    with django_assert_max_num_queries(7):
        response = client.get(reverse("web:case_list"))
    assert response.status_code == 200 and response.context["total"] == 40


@pytest.mark.parametrize("persona", ["analyst", "supervisor"])
def test_case_page_query_count_does_not_grow_with_history(client, request, persona, analyst, supervisor, agent,
                                                          django_assert_max_num_queries):
    case = _busy_case(analyst=analyst, supervisor=supervisor, agent=agent, n=12)
    assert case.events.count() > 70
    client.force_login(request.getfixturevalue(persona))
    # session, user, case, tenant users, evidence, proposals, notices, their approvals and approvers,
    # events, tenant (page header) = 11; one more when a transition condition reads notices; one for
    # the tenant's deadline policy (the due-soon window of the due dates in the header).
    with django_assert_max_num_queries(13):
        response = client.get(reverse("web:case_detail", args=[case.reference]))
    html = response.content.decode()
    assert response.status_code == 200 and "Update 11" in html and "Note 11" in html
    assert len(response.context["notices"]) == 12 and len(response.context["proposals"]) == 13
