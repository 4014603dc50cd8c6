"""End to end in Debian's Chromium (Playwright's sync API, no downloaded browser): people log
in, work a case through the htmx actions, and meet the refusals the services make."""

import os
import shutil

import pytest

# Playwright's sync API runs an asyncio loop in this thread; the ORM calls the tests make between
# browser steps are plain synchronous calls, so Django's async-safety guard is lifted here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from cases import services  # noqa: E402
from cases.models import NoticeStatus, ProposalStatus  # noqa: E402
from tests.factories import make_case  # noqa: E402
from tests.web.browser import CHROMIUM, keep_screenshot, log_in  # noqa: E402,F401  (log_in: used by other modules too)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]




def mark_document(page):
    """Tag the loaded document: the tag survives htmx swaps and disappears on a full page load."""
    page.evaluate("window.__arbiterSamePage = true")


def still_same_document(page) -> bool:
    return page.evaluate("window.__arbiterSamePage === true")


def test_an_analyst_adds_evidence_and_triages_a_case(new_page, analyst):
    case = make_case(actor=analyst, title="Card charged twice for one purchase")
    page = new_page()
    log_in(page, "analyst")
    page.get_by_role("link", name=case.reference).click()
    page.wait_for_url(f"**/cases/{case.reference}/")
    mark_document(page)

    form = page.locator("#evidence-add-text")
    form.locator("summary").click()
    form.get_by_label("Title").fill("Call with the bank")
    form.get_by_label("Text").fill("The agent confirmed the duplicate charge and promised a refund.")
    form.get_by_role("button", name="Add evidence").click()
    page.locator(".evidence-list").get_by_text("Call with the bank").wait_for()
    assert "Evidence “Call with the bank” added." in page.locator("#flash").inner_text()

    page.get_by_role("button", name="Triage").click()
    page.locator("#case-status", has_text="Triaged").wait_for()
    assert page.get_by_role("button", name="Start review").is_visible()
    assert still_same_document(page), "the actions should have been htmx swaps, not page loads"

    case.refresh_from_db()
    assert case.status == "triaged" and case.evidence.count() == 2
    keep_screenshot(page, "arbiter-case")


def test_a_supervisor_approves_an_agent_proposal_from_the_inbox(new_page, analyst, supervisor, agent):
    """Decided in place, in the review workspace's reading pane; the case page then shows it applied."""
    case = make_case(actor=analyst, title="Identity theft: accounts opened in my name")
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="The narrative alleges identity theft (rule FRAUD-ID).")
    page = new_page()
    log_in(page, "supervisor")
    page.get_by_role("link", name="Review").click()
    row = page.locator("tr", has_text=case.reference)
    assert "risk_assessor 1.0" in row.inner_text() and "agent" in row.inner_text().lower()
    pane = page.locator("#review-pane")
    change = pane.locator(f"#pane-proposal-{proposal.pk} h3").inner_text()
    assert "Risk level: Unassessed" in change and change.endswith("High")
    pane.locator("summary", has_text="Approve").click()
    pane.get_by_role("button", name="Confirm: approve").click()
    page.locator("#workspace [data-said]", has_text=f"Approved: P{proposal.pk}").wait_for()
    assert page.url.endswith("/review/")  # no page load: the workspace was swapped in place

    page.goto(f"/cases/{case.reference}/")
    assert "Risk: High" in page.locator(".case-meta").inner_text()
    assert "Risk level: Unassessed → High" in page.locator("#timeline").inner_text()
    proposal.refresh_from_db()
    case.refresh_from_db()
    assert proposal.status == ProposalStatus.APPLIED and case.risk_level == "high"


def test_approving_a_notice_whose_text_changed_shows_the_stale_message(new_page, db_turn, analyst, supervisor):
    case = make_case(actor=analyst, title="Mortgage payment not credited")
    notice = services.notice_draft(actor=analyst, case=case, subject="We received your complaint",
                                   body="We will reply within 15 days.")
    services.notice_submit(actor=analyst, notice=notice)
    page = new_page()
    log_in(page, "supervisor")
    page.goto(f"/cases/{case.reference}/")
    item = page.locator(f"#notice-{notice.pk}")
    assert "We will reply within 15 days." in item.inner_text()

    # While the supervisor reads, the analyst changes the promise and resubmits.
    with db_turn():
        services.notice_edit(actor=analyst, notice=notice, body="We will reply within 5 days.")
        services.notice_submit(actor=analyst, notice=notice)

    item.get_by_role("button", name="Approve this text").click()
    error = page.locator("#action-error")
    error.wait_for()
    assert "The notice changed since you opened it" in error.inner_text()
    assert "We will reply within 5 days." in page.locator(f"#notice-{notice.pk}").inner_text()
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.PENDING_APPROVAL and not notice.approvals.exists()

    # The page now shows the current text, and approving that one works.
    page.locator(f"#notice-{notice.pk}").get_by_role("button", name="Approve this text").click()
    page.locator(f"#notice-{notice.pk} .badge", has_text="Approved").wait_for()
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.APPROVED
    assert notice.approvals.get().content_hash == notice.content_hash


def test_the_case_page_works_without_javascript(new_page, analyst):
    case = make_case(actor=analyst, title="Debt collector calls at work")
    page = new_page(javascript=False)
    log_in(page, "analyst")
    page.goto(f"/cases/{case.reference}/")
    page.get_by_role("button", name="Triage").click()
    page.wait_for_url(f"**/cases/{case.reference}/#status")
    assert page.locator("#case-status").inner_text() == "Triaged"
    case.refresh_from_db()
    assert case.status == "triaged"


def test_a_supervisor_approves_two_sibling_proposals_from_the_review_inbox(new_page, analyst, supervisor, agent):
    """Sibling proposals of one run are approved one after the other (neither stales the
    other); the approval records the evidence listed on the page."""
    from cases.models import Approval

    case = make_case(actor=analyst, title="Identity theft: two accounts opened in my name")
    services.case_transition(actor=analyst, case=case, transition="triage")
    risk = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                    rationale="The narrative alleges identity theft (rule FRAUD-ID).", run_id="41")
    review = services.proposal_create(actor=agent, case=case, kind="status_transition",
                                      payload={"transition": "start_review"}, rationale="Ready for review.",
                                      run_id="41")
    page = new_page()
    log_in(page, "supervisor")
    page.get_by_role("link", name="Review", exact=True).first.click()  # the navigation link
    page.wait_for_url("**/review/")
    row = page.locator(f'tr[data-row-key="g{risk.pk}"]')
    assert "2 from one run" in row.inner_text()
    pane = page.locator("#review-pane")
    assert "Stale" not in pane.inner_text() and "out of date" not in pane.inner_text()
    pane.locator("summary", has_text="Approve these 2").click()
    pane.get_by_role("button", name="Confirm: approve these 2").click()
    page.locator("#workspace [data-said]", has_text="Approved:").wait_for()
    assert "Nothing is waiting for a decision." in page.content()
    risk.refresh_from_db()
    review.refresh_from_db()
    case.refresh_from_db()
    assert (risk.status, review.status) == (ProposalStatus.APPLIED, ProposalStatus.APPLIED)
    assert (case.risk_level, case.status) == ("high", "under_review")
    evidence = sorted(case.evidence.values_list("pk", flat=True))
    assert [a.evidence_in_view for a in Approval.objects.order_by("pk")] == [evidence, evidence]
