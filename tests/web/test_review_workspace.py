"""The review workspace's decisions (web.views.review_decide): each item decided through its service,
bound to what the pane showed; a refusal names the item, leaves the others, and changes nothing."""

import re

import pytest
from django.urls import reverse

from cases import services
from cases.models import Notice, NoticeDispatch, NoticeStatus, Proposal, ProposalStatus
from tests.factories import make_case
from tests.helpers import CountDelta, assert_nothing_changed

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "workspace"}


def siblings(agent, case, run_id="41"):
    risk = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                    rationale="Loss above $1,000.", run_id=run_id)
    triage = services.proposal_create(actor=agent, case=case, kind="status_transition",
                                      payload={"transition": "triage"}, rationale="Complete.", run_id=run_id)
    return risk, triage


def pending_notice(analyst, case, subject="Your complaint"):
    notice = services.notice_draft(actor=analyst, case=case, subject=subject, body="We are looking into it.")
    services.notice_submit(actor=analyst, notice=notice)
    notice.refresh_from_db()
    return notice


def decide(client, user, *items, action="approve", note="", **extra):
    client.force_login(user)
    data = {"action": action, "item": list(items), "note": note, "query": "section=decide", **extra}
    return client.post(reverse("web:review_decide"), data, **HTMX)


def test_sibling_proposals_of_one_run_are_one_row_and_the_pane_shows_each_change(client, agent, supervisor, case):
    risk, triage = siblings(agent, case)
    client.force_login(supervisor)
    html = client.get(reverse("web:review_inbox")).content.decode()
    assert re.findall(r'data-row-key="(\w+)"', html) == [f"g{risk.pk}"]
    pane = html[html.index('id="review-pane"'):]
    assert "2 proposals from one agent run" in pane and "Approve these 2" in pane
    assert f'value="p:{risk.pk}:{case.version}"' in pane and f'value="p:{triage.pk}:{case.version}"' in pane
    assert "Risk level:" in pane and "→" in pane


def test_approve_these_n_approves_each_one_in_turn(client, agent, supervisor, case):
    risk, triage = siblings(agent, case)
    version = case.version
    with CountDelta() as delta:
        response = decide(client, supervisor, f"p:{risk.pk}:{version}", f"p:{triage.pk}:{version}",
                          evidence_seen="")
    assert response.status_code == 200
    assert delta.approvals == 2
    assert set(Proposal.objects.filter(pk__in=[risk.pk, triage.pk]).values_list("status", flat=True)) == \
        {ProposalStatus.APPLIED}
    case.refresh_from_db()
    assert case.risk_level == "high" and case.status == "triaged" and case.version == version + 2
    assert f"Approved: P{risk.pk}" in response.content.decode()


def test_a_refused_sibling_is_named_and_the_others_are_approved(client, agent, analyst, supervisor, case):
    risk, triage = siblings(agent, case)
    version = case.version
    # The case moves on before the group is approved: only the proposal whose precondition
    # changed (the status) is refused, as stale; the risk proposal is still approved.
    services.case_transition(actor=analyst, case=case, transition="triage", reason="Done by hand.")
    case.refresh_from_db()
    response = decide(client, supervisor, f"p:{risk.pk}:{case.version}", f"p:{triage.pk}:{case.version}")
    risk.refresh_from_db()
    triage.refresh_from_db()
    assert risk.status == ProposalStatus.APPLIED and triage.status == ProposalStatus.STALE
    body = response.content.decode()
    assert response.status_code == 409 and f"Not approved: P{triage.pk}" in body and f"Approved: P{risk.pk}" in body
    case.refresh_from_db()
    assert case.version == version + 2  # the hand triage and the risk change


def test_an_approval_against_an_older_version_changes_nothing(client, agent, analyst, supervisor, case):
    risk, _ = siblings(agent, case)
    seen = case.version
    services.evidence_add(actor=analyst, case=case, title="Letter", text="A letter from the bank.", source="upload")
    with assert_nothing_changed(case):
        response = decide(client, supervisor, f"p:{risk.pk}:{seen}")
    assert response.status_code == 409
    assert f"Not approved: P{risk.pk}" in response.content.decode()
    risk.refresh_from_db()
    assert risk.status == ProposalStatus.PENDING


def test_a_proposer_cannot_approve_their_own_proposal_from_the_workspace(client, supervisor, case):
    own = services.proposal_create(actor=supervisor, case=case, kind="risk_level", payload={"risk_level": "low"},
                                   rationale="Mine.")
    with assert_nothing_changed(case):
        response = decide(client, supervisor, f"p:{own.pk}:{case.version}")
    assert response.status_code == 403 and "four eyes" in response.content.decode()


def test_an_analyst_cannot_decide_and_nothing_changes(client, agent, analyst, case):
    risk, _ = siblings(agent, case)
    with assert_nothing_changed(case):
        response = decide(client, analyst, f"p:{risk.pk}:{case.version}")
    assert response.status_code == 403


def test_a_notice_approval_is_bound_to_the_text_shown(client, analyst, supervisor, case):
    notice = pending_notice(analyst, case)
    shown = notice.content_hash
    services.notice_edit(actor=analyst, notice=notice, body="A different text.")
    services.notice_submit(actor=analyst, notice=notice)
    with assert_nothing_changed(case):
        response = decide(client, supervisor, f"n:{notice.pk}:{shown}")
    assert response.status_code == 409 and f"Not approved: notice N{notice.pk}" in response.content.decode()
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.PENDING_APPROVAL


def test_a_notice_is_approved_and_the_next_item_is_selected(client, analyst, supervisor, case):
    first = pending_notice(analyst, case, subject="First")
    second = pending_notice(analyst, case, subject="Second")
    response = decide(client, supervisor, f"n:{first.pk}:{first.content_hash}", next=f"n{second.pk}")
    first.refresh_from_db()
    assert response.status_code == 200 and first.status == NoticeStatus.APPROVED
    assert response.context["selected"].key == f"n{second.pk}"
    assert 'id="workspace"' in response.content.decode() and "<html" not in response.content.decode()


def test_a_flagged_notice_needs_a_reason_and_nothing_changes_without_one(client, analyst, supervisor, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Done",
                                   body="We refunded you on 2001-01-01.")
    services.notice_submit(actor=analyst, notice=notice)
    notice.refresh_from_db()
    assert notice.check_flags
    with assert_nothing_changed(case):
        response = decide(client, supervisor, f"n:{notice.pk}:{notice.content_hash}")
    assert response.status_code == 400
    response = decide(client, supervisor, f"n:{notice.pk}:{notice.content_hash}", confirm_reason="Checked.")
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.APPROVED


def test_reject_needs_a_reason_and_nothing_changes_without_one(client, agent, supervisor, case):
    risk, _ = siblings(agent, case)
    with assert_nothing_changed(case):
        response = decide(client, supervisor, f"p:{risk.pk}:{case.version}", action="reject", note=" ")
    assert response.status_code == 400
    response = decide(client, supervisor, f"p:{risk.pk}:{case.version}", action="reject", note="Not shown.")
    risk.refresh_from_db()
    assert response.status_code == 200 and risk.status == ProposalStatus.REJECTED


@pytest.mark.parametrize("items", [[], ["p:x:1"], ["n:1:short"], ["q:1:1"]])
def test_items_not_understood_are_a_400_and_nothing_changes(client, agent, supervisor, case, items):
    siblings(agent, case)
    with assert_nothing_changed(case):
        response = decide(client, supervisor, *items)
    assert response.status_code == 400


def test_an_item_of_another_tenant_is_a_404_and_nothing_of_the_batch_is_decided(client, agent, supervisor,
                                                                                outsider, case):
    risk, _ = siblings(agent, case)
    theirs = make_case(actor=outsider, title="Theirs", narrative="")
    other = services.proposal_create(actor=agent, case=theirs, kind="risk_level", payload={"risk_level": "low"},
                                     rationale="X.")
    with assert_nothing_changed(case, theirs):
        response = decide(client, supervisor, f"p:{risk.pk}:{case.version}", f"p:{other.pk}:{theirs.version}")
    assert response.status_code == 404


def test_a_plain_post_redirects_to_the_workspace_on_the_next_item(client, agent, supervisor, case):
    risk, triage = siblings(agent, case, run_id="")
    client.force_login(supervisor)
    response = client.post(reverse("web:review_decide"),
                           {"action": "approve", "item": [f"p:{risk.pk}:{case.version}"], "query": "section=decide",
                            "next": f"p{triage.pk}"})
    assert response.status_code == 302 and response["Location"].endswith(f"item=p{triage.pk}")


@pytest.fixture
def unknown_notice(analyst, supervisor, case):
    notice = pending_notice(analyst, case)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    Notice.objects.filter(pk=notice.pk).update(status=NoticeStatus.UNKNOWN)
    NoticeDispatch.objects.create(tenant_id=notice.tenant_id, notice=notice, content_hash=notice.content_hash,
                                  message_id="<m-1@arbiter.example>", approval=notice.approvals.first(),
                                  dispatched_by=f"user:{analyst.pk}", attempts=1, status="unknown")
    notice.refresh_from_db()
    return notice


def test_unknown_notices_have_their_own_section_with_the_settle_form(client, supervisor, unknown_notice):
    client.force_login(supervisor)
    html = client.get(reverse("web:review_inbox") + "?section=unknown").content.decode()
    assert f'data-row-key="n{unknown_notice.pk}"' in html and "Settle its delivery" in html
    assert "&lt;m-1@arbiter.example&gt;" in html


def test_settling_from_the_workspace_uses_the_service(client, supervisor, unknown_notice):
    client.force_login(supervisor)
    url = reverse("web:review_settle", args=[unknown_notice.pk])
    with assert_nothing_changed(unknown_notice.case):
        response = client.post(url, {"outcome": "failed", "reason": "", "query": "section=unknown"}, **HTMX)
    assert response.status_code == 400 and "was not settled" in response.content.decode()
    response = client.post(url, {"outcome": "failed", "reason": "Bounced.", "query": "section=unknown"}, **HTMX)
    unknown_notice.refresh_from_db()
    assert response.status_code == 200 and unknown_notice.status == NoticeStatus.FAILED


def test_an_analyst_cannot_settle_and_nothing_changes(client, analyst, unknown_notice):
    client.force_login(analyst)
    with assert_nothing_changed(unknown_notice.case):
        response = client.post(reverse("web:review_settle", args=[unknown_notice.pk]),
                               {"outcome": "failed", "reason": "Bounced."}, **HTMX)
    assert response.status_code == 403


def test_overdue_items_have_their_own_section(client, agent, supervisor, case):
    from cases.models import Case

    risk, _ = siblings(agent, case)
    other = make_case(actor=supervisor, title="Not late", narrative="")
    services.proposal_create(actor=agent, case=other, kind="risk_level", payload={"risk_level": "low"},
                             rationale="Fine.")
    Case.objects.filter(pk=case.pk).update(next_due="2000-01-01")
    client.force_login(supervisor)
    html = client.get(reverse("web:review_inbox") + "?section=overdue").content.decode()
    assert re.findall(r'data-row-key="(\w+)"', html) == [f"g{risk.pk}"]


def test_the_pane_alone_answers_an_htmx_request_aimed_at_it(client, agent, supervisor, case):
    risk, _ = siblings(agent, case)
    client.force_login(supervisor)
    response = client.get(reverse("web:review_inbox") + f"?item=g{risk.pk}", HTTP_HX_REQUEST="true",
                          HTTP_HX_TARGET="review-pane")
    html = response.content.decode()
    assert response.status_code == 200 and "pane-head" in html and 'id="workspace"' not in html
