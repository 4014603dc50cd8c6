"""End to end in Debian's Chromium: finding a case by two words of its narrative, sorting,
taking a case (and where the focus goes), a run finishing and its proposals appearing without a
reload, a notice turning into "sent", the 390 px layout, and axe-core on every main page."""

import os
import shutil

import pytest
from playwright.sync_api import expect

# Playwright's sync API runs an asyncio loop in this thread; the ORM calls the tests make between
# browser steps are plain synchronous calls, so Django's async-safety guard is lifted here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from cases import services  # noqa: E402
from cases.models import NoticeStatus  # noqa: E402
from runs import services as run_services  # noqa: E402
from runs.models import RunStatus  # noqa: E402
from tests.factories import make_case  # noqa: E402
from tests.runs.conftest import drive  # noqa: E402
from tests.web.browser import CHROMIUM, log_in  # noqa: E402,F401  (log_in: used by other modules too)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]


@pytest.fixture(autouse=True)
def queued(monkeypatch):
    """No broker in tests: steps and notice dispatches are recorded; the test plays the worker."""
    calls = {"steps": [], "dispatches": []}
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls["steps"].append(run_id))
    monkeypatch.setattr("cases.tasks.notice_dispatch_task.delay",
                        lambda notice_id, user_id=None: calls["dispatches"].append(notice_id))
    return calls




def mark_document(page):
    page.evaluate("window.__arbiterSamePage = true")


def still_same_document(page) -> bool:
    return page.evaluate("window.__arbiterSamePage === true")


def queue_references(page) -> list[str]:
    return [text.strip() for text in page.locator("#case-results tbody tr td:first-child a").all_inner_texts()]


# --- find the work -----------------------------------------------------------------------------------

def test_finding_a_case_by_two_words_of_its_narrative(new_page, analyst):
    wanted = make_case(actor=analyst, title="Escrow question",
                       narrative="The servicer misapplied my escrow payment and charged a late fee.")
    make_case(actor=analyst, title="Another escrow question", narrative="The servicer never answered my letters.")
    page = new_page()
    log_in(page, "analyst")
    mark_document(page)
    page.get_by_label("Search").fill("misapplied servicer")
    page.locator("#case-results .results-count", has_text="1 case").wait_for()
    assert queue_references(page) == [wanted.reference]
    assert still_same_document(page) and "q=misapplied%20servicer" in page.url


def test_sorting_the_queue_by_a_column(new_page, analyst, supervisor, agent):
    levels = {}
    for level in ("medium", "critical", "low"):
        case = make_case(actor=analyst, title=f"Risk {level}", narrative="")
        proposal = services.proposal_create(actor=agent, case=case, kind="risk_level",
                                            payload={"risk_level": level}, rationale="Assessed.")
        services.proposal_approve(actor=supervisor, proposal=proposal)
        levels[level] = case.reference
    page = new_page()
    log_in(page, "analyst")
    page.locator("#case-results th", has_text="Risk").get_by_role("link").click()
    page.locator('#case-results th[aria-sort="descending"]', has_text="Risk").wait_for()
    assert queue_references(page) == [levels["critical"], levels["medium"], levels["low"]]
    page.locator("#case-results th", has_text="Risk").get_by_role("link").click()
    page.locator('#case-results th[aria-sort="ascending"]', has_text="Risk").wait_for()
    assert queue_references(page) == [levels["low"], levels["medium"], levels["critical"]]


def test_sorting_the_queue_by_due_date(new_page, analyst):
    from datetime import timedelta

    from django.utils import timezone

    today = timezone.localdate()
    cases = {days: make_case(actor=analyst, title=f"Received {days} days ago", narrative="",
                             received_at=today - timedelta(days=days)).reference for days in (5, 90, 30)}
    page = new_page()
    log_in(page, "analyst")
    page.locator("#case-results th", has_text="Due").get_by_role("link").click()
    page.locator('#case-results th[aria-sort="ascending"]', has_text="Due").wait_for()
    assert queue_references(page) == [cases[90], cases[30], cases[5]]  # soonest (most overdue) first
    # The Sort control follows the header's sort, and the Overdue view keeps it (one URL state).
    assert page.get_by_label("Sort by").input_value() == "due"
    page.get_by_role("link", name="Overdue").click()
    page.wait_for_url("**/?sort=due&view=overdue")
    assert cases[90] in queue_references(page)
    assert page.get_by_label("Sort by").input_value() == "due"


def test_taking_a_case_moves_the_focus_to_its_message(new_page, analyst):
    case = make_case(actor=analyst, title="Nobody's yet", narrative="")
    page = new_page()
    log_in(page, "analyst")
    mark_document(page)
    page.get_by_role("button", name=f"Take {case.reference}").click()
    message = page.locator(f"#case-row-{case.pk} .row-message")
    message.wait_for()
    assert message.inner_text().strip() == f"{case.reference} is now yours."
    expect(page.locator(".row-message:focus")).to_have_count(1)  # polls without eval (the CSP forbids it)
    assert still_same_document(page)
    case.refresh_from_db()
    assert case.assignee == analyst


# --- live progress --------------------------------------------------------------------------------------

def test_a_finished_run_s_proposals_appear_without_a_reload(new_page, db_turn, analyst, settings):
    case = make_case(actor=analyst, title="Identity theft: accounts opened in my name",
                     narrative="Someone opened two credit cards in my name; I lost $2,400 and the bank ignores me.")
    run = run_services.run_start(actor=analyst, case=case)
    page = new_page()
    log_in(page, "analyst")
    page.goto(f"/cases/{case.reference}/")
    page.locator("#case-runs .badge", has_text="Queued").wait_for()
    mark_document(page)
    assert page.locator("#case-proposals-region .items").count() == 0
    with db_turn():
        run = drive(run)  # the worker's part
    assert run.status == RunStatus.COMPLETED and case.proposals.exists()
    page.locator("#case-proposals-region .items").wait_for()
    page.locator("#flash", has_text=f"Analysis R{run.pk} finished").wait_for()
    assert still_same_document(page), "the proposals should have arrived without a reload"


def test_sending_a_notice_turns_into_sent_without_a_reload(new_page, db_turn, analyst, supervisor, queued):
    case = make_case(actor=analyst, title="Late fee dispute")
    notice = services.notice_draft(actor=analyst, case=case, subject="About your complaint", body="We are on it.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    page = new_page()
    log_in(page, "analyst")
    page.goto(f"/cases/{case.reference}/")
    mark_document(page)
    page.locator(f"#notice-{notice.pk}").get_by_role("button", name="Send notice").click()
    page.locator("#flash .flash").first.wait_for()
    assert still_same_document(page)
    assert queued["dispatches"] == [notice.pk]
    with db_turn():
        services.notice_dispatch(actor=analyst, notice=notice)  # the worker's part
    page.locator(f"#notice-{notice.pk}", has_text="Sent ").wait_for()
    assert still_same_document(page)
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.SENT


# --- works for everyone -----------------------------------------------------------------------------------

# The elements that stick out of the viewport, outside any scrolling box (for the failure message).
WIDEST = """() => {
  const width = document.documentElement.clientWidth, found = [];
  for (const el of document.querySelectorAll("body *")) {
    let scroller = el.parentElement, inside = false;
    while (scroller && scroller !== document.body) {
      const o = getComputedStyle(scroller).overflowX;
      if (o === "auto" || o === "scroll") { inside = true; break; }
      scroller = scroller.parentElement;
    }
    if (!inside && el.getBoundingClientRect().right > width + 1) {
      found.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + "." + [...el.classList].join(".") + "@" + Math.round(el.getBoundingClientRect().right));
    }
  }
  return found.slice(0, 8);
}"""


def main_pages(*, analyst, supervisor, auditor, agent):
    """(who, path) for every main page, with something on each."""
    case = make_case(actor=analyst, title="Card charged twice for one purchase")
    services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Loss above $1,000.")
    notice = services.notice_draft(actor=analyst, case=case, subject="We received your complaint", body="Hello.")
    services.notice_submit(actor=analyst, notice=notice)
    run = drive(run_services.run_start(actor=analyst, case=case))
    return [
        ("analyst", "/"), ("analyst", "/?view=unassigned"), ("analyst", f"/cases/{case.reference}/"),
        ("analyst", "/cases/new/"), ("supervisor", "/review/"), ("analyst", "/review/?section=rejected"),
        ("analyst", "/runs/"), ("analyst", f"/runs/{run.pk}/"), ("analyst", f"/runs/{run.pk}/steps/1/"),
        ("analyst", "/threads/"), ("analyst", "/memory/"), ("auditor", "/audit/"),
        ("auditor", f"/cases/{case.reference}/audit/"),
    ]


def test_axe_finds_no_serious_or_critical_violation_on_any_main_page(new_page, analyst, supervisor, auditor, agent):
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    pages = main_pages(analyst=analyst, supervisor=supervisor, auditor=auditor, agent=agent)
    found = {}
    sessions = {}
    for who, path in pages:
        if who not in sessions:
            sessions[who] = new_page()
            log_in(sessions[who], who)
        page = sessions[who]
        page.goto(path)
        page.wait_for_load_state("networkidle")
        violations = axe.run(page).response["violations"]
        bad = [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
               for v in violations if v["impact"] in ("serious", "critical")]
        if bad:
            found[path] = bad
    assert not found, found


def test_at_390_px_no_page_scrolls_sideways_and_the_navigation_collapses(new_page, analyst, supervisor, auditor,
                                                                         agent):
    pages = main_pages(analyst=analyst, supervisor=supervisor, auditor=auditor, agent=agent)
    sessions = {}
    wide = {}
    for who, path in pages:
        if who not in sessions:
            sessions[who] = new_page(width=390, height=844)
            log_in(sessions[who], who)
        page = sessions[who]
        page.goto(path)
        page.wait_for_load_state("networkidle")
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 0:
            wide[path] = (overflow, page.evaluate(WIDEST))
    assert not wide, f"pages wider than 390 px (by px): {wide}"
    page = sessions["analyst"]
    page.goto("/")
    menu = page.get_by_role("button", name="Menu")
    assert menu.is_visible() and not page.get_by_role("link", name="Runs").is_visible()
    menu.click()
    assert page.get_by_role("link", name="Runs").is_visible() and menu.get_attribute("aria-expanded") == "true"


def test_after_an_htmx_action_the_focus_moves_to_its_message(new_page, analyst):
    case = make_case(actor=analyst, title="Focus check", narrative="")
    page = new_page()
    log_in(page, "analyst")
    page.goto(f"/cases/{case.reference}/")
    mark_document(page)
    page.get_by_role("button", name="Triage").click()
    page.locator("#case-status", has_text="Triaged").wait_for()
    expect(page.locator("#flash:focus, #flash :focus")).to_have_count(1)  # polls without eval (the CSP forbids it)
    assert still_same_document(page)
    assert "riage" in page.evaluate("document.activeElement.textContent")
