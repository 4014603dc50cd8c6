"""In Chromium: approving a proposal from its card with the cited quote highlighted; the
case page with a highlighted quote passes axe and does not scroll sideways at 390 px."""

import os
import shutil

import pytest
from playwright.sync_api import expect

# Playwright's sync API runs an asyncio loop in this thread; the ORM calls the tests make between
# browser steps are plain synchronous calls, so Django's async-safety guard is lifted here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from cases.models import ProposalStatus  # noqa: E402
from runs import services as run_services  # noqa: E402
from tests.factories import make_case  # noqa: E402
from tests.runs.conftest import drive  # noqa: E402
from tests.web.browser import CHROMIUM, log_in  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]

NARRATIVE = ("I have been a customer for years. Someone opened two credit cards in my name; I lost $2,400 <b>and</b> "
             "the bank ignores me.\n\nI   called them  five times. Nobody answered my letters either, and the "
             "statements keep coming to an address I left in 2019.")
QUOTE = "I called them five times."


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)


def analysed_case(analyst):
    case = make_case(actor=analyst, title="Identity theft: accounts opened in my name", narrative=NARRATIVE)
    drive(run_services.run_start(actor=analyst, case=case))
    return case


def test_approving_a_proposal_from_its_card_with_the_cited_quote_highlighted(new_page, analyst, supervisor):
    case = analysed_case(analyst)
    risk = case.proposals.get(kind="risk_level")
    page = new_page(height=700)
    log_in(page, "supervisor")
    page.goto(f"/cases/{case.reference}/")
    page.evaluate("window.__arbiterSamePage = true")
    card = page.locator(f"#proposal-{risk.pk}")
    card.get_by_role("link", name=f"“{QUOTE}”").click()
    mark = page.locator("mark#quote-mark")
    mark.wait_for()
    # The span as written in the evidence (its runs of spaces), found as the citation was verified.
    assert mark.text_content() == "I   called them  five times."
    expect(mark).to_be_focused()  # polls without eval (the page's CSP forbids it)
    assert mark.is_visible() and mark.evaluate(
        "m => { const r = m.getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; }")
    assert page.evaluate("window.__arbiterSamePage === true"), "the quote should be highlighted in place"
    assert f"quote={risk.pk}." in page.url
    # Approve from the same card: the result arrives without a reload.
    card.get_by_role("button", name="Approve and apply").click()
    card.locator(".badge", has_text="Applied").wait_for()
    page.locator(".case-meta", has_text="Risk: Critical").wait_for()
    assert page.evaluate("window.__arbiterSamePage === true")
    risk.refresh_from_db()
    assert risk.status == ProposalStatus.APPLIED and risk.decided_by == supervisor


def test_the_case_page_with_a_highlighted_quote_passes_axe_and_fits_390_px(new_page, analyst, supervisor):
    from axe_playwright_python.sync_playwright import Axe

    case = analysed_case(analyst)
    risk = case.proposals.get(kind="risk_level")
    url = f"/cases/{case.reference}/?quote={risk.pk}.0"
    for width in (1360, 390):
        page = new_page(width=width, height=844)
        log_in(page, "supervisor")
        page.goto(url)
        page.wait_for_load_state("networkidle")
        mark = page.locator("mark#quote-mark")
        assert "Someone opened two credit cards in my name" in mark.text_content()
        # Opened from a link (no htmx swap): the page focuses the quote itself.
        expect(mark).to_be_focused()
        violations = Axe().run(page).response["violations"]
        bad = [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
               for v in violations if v["impact"] in ("serious", "critical")]
        assert not bad, (width, bad)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{width} px: the page is {overflow} px wider than the window"
