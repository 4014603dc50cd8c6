"""The review workspace in Debian's Chromium: a supervisor decides a morning's pending items
(an agent run's sibling proposals, single proposals, notices, one rejection) with the keyboard only,
in one page load; axe-core on the workspace and the shortcut list at 1440 and 390 px; at 390 px the
primary action is on screen; the queue shows at least 12 rows at 1440×900.

Set ARBITER_SCREENSHOTS=<dir> to keep a screenshot of each state looked at."""

import os
import shutil
from pathlib import Path

import pytest

# Playwright's sync API runs an asyncio loop in this thread; the ORM calls the tests make between
# browser steps are plain synchronous calls, so Django's async-safety guard is lifted here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from cases import services  # noqa: E402
from cases.models import Notice, NoticeStatus, Proposal, ProposalStatus  # noqa: E402
from runs import services as run_services  # noqa: E402
from tests.factories import make_case  # noqa: E402
from tests.runs.conftest import drive  # noqa: E402
from tests.web.browser import CHROMIUM, log_in  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]


@pytest.fixture(autouse=True)
def queued(monkeypatch):
    """No broker in tests: run steps are recorded; the test plays the worker (tests.runs.conftest.drive)."""
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)


def shot(page, name: str) -> None:
    folder = os.environ.get("ARBITER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def a_morning(*, analyst, agent) -> dict:
    """Pending work: one agent run's proposals (siblings), three single proposals, five notices."""
    run_case = make_case(actor=analyst, title="Card charged twice for one purchase",
                         narrative="I was charged $1,250 twice for one purchase and the bank refused to refund me.")
    drive(run_services.run_start(actor=analyst, case=run_case))
    group = list(Proposal.objects.filter(case=run_case, status=ProposalStatus.PENDING).exclude(run_id=""))
    singles = []
    for n, level in enumerate(("low", "medium", "high")):
        case = make_case(actor=analyst, title=f"Statement question {n}", narrative="")
        singles.append(services.proposal_create(actor=agent, case=case, kind="risk_level",
                                                payload={"risk_level": level}, rationale="Assessed from the narrative."))
    notices = []
    for n in range(5):
        case = make_case(actor=analyst, title=f"Letter needed {n}", narrative="")
        notice = services.notice_draft(actor=analyst, case=case, subject=f"About your complaint {n}",
                                       body="We are looking into your complaint.")
        services.notice_submit(actor=analyst, notice=notice)
        notices.append(notice)
    return {"group": group, "singles": singles, "notices": notices}


class Keys:
    """Presses keys on the page and counts them (typed text counts one per character)."""

    def __init__(self, page):
        self.page, self.count = page, 0

    def press(self, *keys: str) -> None:
        for key in keys:
            self.page.keyboard.press(key)
            self.count += 1

    def type(self, text: str) -> None:
        self.page.keyboard.type(text)
        self.count += len(text)


def wait_decided(page, said: str) -> None:
    page.locator("#workspace [data-said]", has_text=said).first.wait_for()


def focus_is_in_the_list(page) -> bool:
    """Waits (up to 5 s) for the focus to settle in the list after a swap (wait_for_function would
    evaluate a string, which the page's CSP refuses)."""
    for _ in range(50):
        if page.evaluate("!!(document.activeElement && document.activeElement.closest('.workspace-list'))"):
            return True
        page.wait_for_timeout(100)
    return False


def test_a_supervisor_decides_a_morning_keyboard_only_in_one_page_load(new_page, analyst, supervisor, agent):
    work = a_morning(analyst=analyst, agent=agent)
    assert len(work["group"]) >= 2, "the agent run should leave sibling proposals"
    page = new_page(width=1440, height=900)
    log_in(page, "supervisor")
    page.goto("/review/")
    loads = []
    page.on("load", lambda: loads.append(page.url))
    page.evaluate("window.__samePage = true")
    shot(page, "workspace-1440")
    # Dense: every row of this morning (9) fits in the first screen at 1440×900, columns in view.
    assert page.evaluate("""() => Array.from(document.querySelectorAll('.review-row'))
        .filter(r => r.getBoundingClientRect().bottom <= window.innerHeight).length""") >= 8
    assert page.evaluate("""() => { const list = document.querySelector('.workspace-list');
        return list.scrollWidth <= list.clientWidth; }""")
    keys = Keys(page)
    # Enter reads the selected item (the focus moves into the pane), Esc comes back to the list;
    # "/" goes to the search box.
    page.locator(".review-row.is-selected [data-row-link]").focus()
    keys.press("Enter")
    assert page.evaluate("document.activeElement.id") == "review-pane"
    keys.press("Escape")
    assert focus_is_in_the_list(page)
    keys.press("/")
    assert page.evaluate("document.activeElement.name") == "q"
    keys.press("Escape")
    assert focus_is_in_the_list(page)
    # The oldest row first: the agent run's group. "a" opens its approval, Enter confirms all of them.
    assert page.locator("#review-pane").get_by_text(f"{len(work['group'])} proposals from one agent run").is_visible()
    # The quote the agent cites is marked in its evidence, in context.
    assert "charged $1,250 twice" in page.locator("#review-pane .evidence-context mark").first.inner_text()
    keys.press("a")
    shot(page, "workspace-approve-open-1440")
    keys.press("Enter")
    wait_decided(page, "Approved:")
    assert focus_is_in_the_list(page)
    for proposal in work["singles"][:2]:
        page.locator(f'.review-row.is-selected[data-row-key="p{proposal.pk}"]').wait_for()
        keys.press("a", "Enter")
        page.locator(f'.review-row[data-row-key="p{proposal.pk}"]').wait_for(state="detached")
        assert focus_is_in_the_list(page)
    # The third single proposal is rejected, with a reason typed in place.
    last = work["singles"][2]
    page.locator(f'.review-row.is-selected[data-row-key="p{last.pk}"]').wait_for()
    keys.press("r")
    keys.type("No")
    keys.press("Enter")
    page.locator(f'.review-row[data-row-key="p{last.pk}"]').wait_for(state="detached")
    # The notices: j and k move through them (the pane follows), then each is approved.
    first_notice = work["notices"][0]
    page.locator(f'.review-row.is-selected[data-row-key="n{first_notice.pk}"]').wait_for()
    keys.press("j")
    page.locator(f'#review-pane [data-pane-key="n{work["notices"][1].pk}"]').wait_for()
    keys.press("k")
    page.locator(f'#review-pane [data-pane-key="n{first_notice.pk}"]').wait_for()
    assert focus_is_in_the_list(page)
    for notice in work["notices"]:
        page.locator(f'#review-pane [data-pane-key="n{notice.pk}"]').wait_for()
        keys.press("a", "Enter")
        page.locator(f'.review-row[data-row-key="n{notice.pk}"]').wait_for(state="detached")
    page.locator(".empty-list").wait_for()
    shot(page, "workspace-done-1440")

    decided = len(work["group"]) + 3 + 5
    assert decided >= 10
    assert keys.count <= 40, keys.count
    print(f"decided {decided} items with {keys.count} keystrokes and {len(loads)} page loads after the first")
    assert loads == [] and page.evaluate("window.__samePage === true")
    statuses = set(Proposal.objects.filter(pk__in=[p.pk for p in work["group"] + work["singles"][:2]])
                   .values_list("status", flat=True))
    assert statuses == {ProposalStatus.APPLIED}
    assert Proposal.objects.get(pk=last.pk).status == ProposalStatus.REJECTED
    assert Proposal.objects.get(pk=last.pk).decision_note == "No"
    assert set(Notice.objects.filter(pk__in=[n.pk for n in work["notices"]]).values_list("status", flat=True)) \
        == {NoticeStatus.APPROVED}


def serious(axe, page) -> list[str]:
    violations = axe.run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
            for v in violations if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_axe_on_the_workspace_and_the_shortcut_list(new_page, analyst, supervisor, agent, width, height):
    from axe_playwright_python.sync_playwright import Axe

    a_morning(analyst=analyst, agent=agent)
    axe = Axe()
    page = new_page(width=width, height=height)
    log_in(page, "supervisor")
    page.goto("/review/")
    page.wait_for_load_state("networkidle")
    found = {"workspace": serious(axe, page)}
    page.locator('#review-pane details[data-decide="reject"] > summary').click()
    found["reject form open"] = serious(axe, page)
    if width > 600:
        page.keyboard.press("Escape")
        page.keyboard.press("?")
        page.locator("#shortcut-help").wait_for()
        shot(page, f"help-{width}")
        found["shortcut list"] = serious(axe, page)
    assert not any(found.values()), found


def test_at_390_the_primary_action_is_on_screen(new_page, analyst, supervisor, agent):
    work = a_morning(analyst=analyst, agent=agent)
    page = new_page(width=390, height=844)
    log_in(page, "supervisor")
    page.goto("/review/")
    shot(page, "workspace-390")
    approve = page.locator('#review-pane details[data-decide="approve"] > summary')
    box = approve.bounding_box()
    assert box and 0 <= box["y"] and box["y"] + box["height"] <= 844 and box["x"] + box["width"] <= 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    # Each card in the list carries its own action, visible on the card.
    notice = work["notices"][0]
    review = page.locator(f'.review-row[data-row-key="n{notice.pk}"] [data-row-review]')
    review.scroll_into_view_if_needed()
    assert review.is_visible()
    review.click()
    page.locator(f'#review-pane [data-pane-key="n{notice.pk}"]').wait_for()
    shot(page, "workspace-390-notice")
    box = page.locator('#review-pane details[data-decide="approve"] > summary').bounding_box()
    assert box and 0 <= box["y"] and box["y"] + box["height"] <= 844


def test_the_queue_shows_at_least_12_rows_at_1440_by_900(new_page, analyst):
    for n in range(14):
        make_case(actor=analyst, title=f"Disputed charge number {n} on the statement", narrative="")
    page = new_page(width=1440, height=900)
    log_in(page, "analyst")
    shot(page, "queue-1440")
    rows = page.locator("#case-results tbody tr")
    assert rows.count() >= 12
    visible = page.evaluate("""() => Array.from(document.querySelectorAll('#case-results tbody tr'))
        .filter(r => r.getBoundingClientRect().bottom <= window.innerHeight).length""")
    assert visible >= 12, visible
    # Every column readable: the table fits its box (no column hidden behind a sideways scroll).
    assert page.evaluate("""() => { const wrap = document.querySelector('#case-results .table-wrap');
        return wrap.scrollWidth <= wrap.clientWidth; }""")
    assert page.locator("#case-results th", has_text="Updated").is_visible()


def test_the_notifications_page_and_the_bell(new_page, analyst, supervisor, agent):
    from axe_playwright_python.sync_playwright import Axe

    case = make_case(actor=analyst, title="Fee charged twice", narrative="")
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    services.proposal_reject(actor=supervisor, proposal=proposal, note="Not shown in the evidence.")
    page = new_page(width=1440, height=900)
    log_in(page, "analyst")
    page.locator("#bell-count .bell-count", has_text="1").wait_for()  # the poll counts it
    page.get_by_role("link", name="Notifications").click()
    page.wait_for_url("**/notifications/all/")
    shot(page, "notifications-1440")
    assert not serious(Axe(), page)
    page.get_by_role("button", name="Mark all read").click()
    page.wait_for_url("**/notifications/all/")
    assert page.locator(".notification-list .is-unread").count() == 0
    page.get_by_role("link", name=f"Proposal P{proposal.pk}", exact=False).click()
    page.wait_for_url(f"**/cases/{case.reference}/#proposal-{proposal.pk}")


def test_at_390_the_queue_is_cards_with_take_on_screen(new_page, analyst):
    for n in range(3):
        make_case(actor=analyst, title=f"Card statement question {n} about a duplicated charge", narrative="")
    page = new_page(width=390, height=844)
    log_in(page, "analyst")
    page.locator("#case-results").scroll_into_view_if_needed()
    shot(page, "queue-390")
    take = page.locator("#case-results tbody tr").first.get_by_role("button", name="Take")
    take.scroll_into_view_if_needed()
    box = take.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.evaluate("""() => { const wrap = document.querySelector('#case-results .table-wrap');
        return wrap.scrollWidth <= wrap.clientWidth; }""")  # no sideways scroll inside the list either


def row_top(page, selector: str) -> float:
    return page.locator(selector).bounding_box()["y"]


def test_the_queue_shows_new_and_changed_cases_without_a_reload_and_keeps_the_focus(
        new_page, analyst, supervisor, settings, db_turn):
    settings.ARBITER_LIVE_LIST_SECONDS = 1
    cases = [make_case(actor=analyst, title=f"Disputed charge {n} on the statement", narrative="") for n in range(4)]
    page = new_page(width=1440, height=900)
    log_in(page, "analyst")
    loads = []
    page.on("load", lambda: loads.append(page.url))
    page.evaluate("window.__samePage = true")
    focused = f"#case-row-{cases[1].pk} td a"
    page.locator(focused).first.focus()
    page.locator(focused).first.hover()
    top = row_top(page, f"#case-row-{cases[1].pk}")
    page.wait_for_timeout(1500)  # the first poll has taken the page's token
    with db_turn():  # another person, in another session
        services.case_transition(actor=supervisor, case=cases[2], transition="triage")
        newcomer = make_case(actor=supervisor, title="A new complaint arrived", narrative="")
    # The changed row is updated in place; the new one waits behind the "1 new" bar.
    page.locator(f"#case-row-{cases[2].pk}", has_text="Triaged").wait_for()
    page.locator("#live-bar", has_text="1 new item").wait_for()
    shot(page, "queue-live-1440")
    assert page.locator(f"#case-row-{newcomer.pk}").count() == 0
    assert page.evaluate("document.activeElement.closest('tr') && document.activeElement.closest('tr').id") \
        == f"case-row-{cases[1].pk}"
    assert row_top(page, f"#case-row-{cases[1].pk}") == top  # the row under the pointer did not move
    page.get_by_role("button", name="1 new item — show").click()
    page.locator(f"#case-row-{newcomer.pk}").wait_for()
    assert loads == [] and page.evaluate("window.__samePage === true")


def test_the_inbox_shows_a_new_item_without_a_reload(new_page, analyst, supervisor, agent, settings, db_turn):
    settings.ARBITER_LIVE_LIST_SECONDS = 1
    work = a_morning(analyst=analyst, agent=agent)
    page = new_page(width=1440, height=900)
    log_in(page, "supervisor")
    page.goto("/review/")
    page.evaluate("window.__samePage = true")
    selected = page.locator(".review-row.is-selected [data-row-link]")
    selected.focus()
    key = page.evaluate("document.activeElement.closest('tr').dataset.rowKey")
    page.wait_for_timeout(1500)
    with db_turn():
        case = make_case(actor=analyst, title="One more statement question", narrative="")
        fresh = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "low"},
                                         rationale="Small amount.")
        services.proposal_reject(actor=supervisor, proposal=work["singles"][0], note="Decided elsewhere.")
    page.locator("#live-bar", has_text="1 new item").wait_for()
    page.locator(f'.review-row.is-gone[data-row-key="p{work["singles"][0].pk}"]').wait_for()
    assert page.evaluate("document.activeElement.closest('tr').dataset.rowKey") == key
    page.get_by_role("button", name="1 new item — show").click()
    page.locator(f'.review-row[data-row-key="p{fresh.pk}"]').wait_for()
    assert page.evaluate("window.__samePage === true")


VISIBLE_ROWS = """(selector) => Array.from(document.querySelectorAll(selector))
    .filter(r => r.getBoundingClientRect().top >= 0 && r.getBoundingClientRect().bottom <= window.innerHeight).length"""


def test_compact_and_comfortable_lists_at_1440_by_900(new_page, analyst, supervisor, agent):
    for n in range(18):
        case = make_case(actor=analyst, title=f"Disputed charge number {n} on the statement", narrative="")
        services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "medium"},
                                 rationale="Assessed from the narrative.")
    page = new_page(width=1440, height=900)
    log_in(page, "supervisor")
    counts = {}
    for density in ("compact", "comfortable"):
        assert page.evaluate("document.body.className") == f"density-{density}"
        page.goto("/")
        shot(page, f"queue-{density}-1440")
        counts[("queue", density)] = page.evaluate(VISIBLE_ROWS, "#case-results tbody tr")
        page.goto("/review/")
        shot(page, f"inbox-{density}-1440")
        counts[("inbox", density)] = page.evaluate(VISIBLE_ROWS, ".review-row")
        if density == "compact":  # the toggle in the top bar; remembered on the account
            page.get_by_role("button", name="Compact lists").click()
            page.wait_for_url("**/review/")
    print("rows in view at 1440×900:", counts)
    assert counts[("queue", "compact")] >= 12 and counts[("inbox", "compact")] >= 8, counts
    assert counts[("queue", "comfortable")] < counts[("queue", "compact")], counts
    assert counts[("inbox", "comfortable")] < counts[("inbox", "compact")], counts
    page.goto("/")  # still comfortable on the next page load
    assert page.evaluate("document.body.className") == "density-comfortable"


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_axe_on_every_page_and_state(new_page, analyst, supervisor, agent, width, height, db_turn):
    """0 serious or critical axe violations on each page and state this work touches, at both widths:
    the queue, the global search, a case page, the workspace with its forms and the shortcut list,
    a decision's message, the notifications page, and the audit page after "Verify now"."""
    from axe_playwright_python.sync_playwright import Axe

    work = a_morning(analyst=analyst, agent=agent)
    case = work["singles"][0].case
    services.proposal_reject(actor=supervisor, proposal=work["singles"][1], note="Not shown in the evidence.")
    axe, found = Axe(), {}

    def check(page, name):
        page.wait_for_load_state("networkidle")
        shot(page, f"{name}-{width}")
        found[name] = serious(axe, page)
        assert page.evaluate("document.documentElement.scrollWidth") <= width, name

    page = new_page(width=width, height=height)
    log_in(page, "supervisor")
    check(page, "queue")
    page.goto(f"/search/?q={case.reference}")
    page.locator("table.table--search tbody tr").first.wait_for()
    check(page, "search")
    page.goto(f"/cases/{case.reference}/")
    check(page, "case")
    page.keyboard.press("/")  # a page without a list search of its own: "/" goes to the search of all cases
    assert page.evaluate("document.activeElement.id") == "global-search-q"
    page.keyboard.type(case.title.split()[0])
    page.keyboard.press("Enter")
    page.wait_for_url("**/search/?q=*")
    assert page.locator("table.table--search tbody tr").count() >= 1
    page.goto("/review/")
    check(page, "workspace")
    page.locator('#review-pane details[data-decide="approve"] > summary').click()
    check(page, "workspace-approve-open")
    page.locator('#review-pane details[data-decide="reject"] > summary').click()
    check(page, "workspace-reject-open")
    page.keyboard.press("Escape")
    page.locator(".review-row.is-selected [data-row-link]").focus()
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    wait_decided(page, "Approved:")
    check(page, "workspace-decided-message")
    focus_is_in_the_list(page)
    page.keyboard.press("?")  # (at 390 the button is hidden: a phone has no keys; a tablet's keyboard does)
    page.locator("#shortcut-help").wait_for()
    check(page, "shortcut-help")
    page.keyboard.press("Escape")
    page.goto("/audit/?scope=all")
    page.locator(f'[data-stream="case:{case.pk}"] button', has_text="Verify now").click()
    page.locator(".flash", has_text="intact").wait_for()
    check(page, "audit-after-verify-now")
    page.goto(f"/cases/{case.reference}/audit/")
    check(page, "case-audit")
    page.context.clear_cookies()
    log_in(page, "analyst")
    page.goto("/notifications/all/")
    check(page, "notifications")
    page.goto(f"/cases/{work['singles'][2].case.reference}/")
    check(page, "case-as-proposer")
    assert not any(found.values()), {k: v for k, v in found.items() if v}
