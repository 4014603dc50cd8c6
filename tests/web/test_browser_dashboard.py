"""The supervisor's dashboard in Debian's Chromium at 1440 and 390 px: axe-core finds no serious or
critical violation, no CSP violation is reported, the page does not scroll sideways at 390 px, each
chart has its table, and a number followed from the page lists that many cases.

Set ARBITER_SCREENSHOTS=<dir> to keep a screenshot of each width."""

import os
import shutil
from pathlib import Path

import pytest
from django.utils import timezone

# Playwright's sync API runs an asyncio loop in this thread; the ORM calls the tests make between
# browser steps are plain synchronous calls, so Django's async-safety guard is lifted here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from reports.services import dashboard_refresh  # noqa: E402
from tests.reports import scenario  # noqa: E402
from tests.web.browser import CHROMIUM, log_in  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]


def shot(page, name: str) -> None:
    folder = os.environ.get("ARBITER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


@pytest.fixture(autouse=True)
def today(monkeypatch):
    """The scenario's today, for the live server's pages too (it serves from a thread of this process)."""
    localdate = timezone.localdate
    monkeypatch.setattr(timezone, "localdate", lambda value=None, timezone=None: (
        scenario.TODAY if value is None else localdate(value)))


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_the_dashboard_passes_axe_and_fits_the_window(new_page, tenant, analyst, analyst_b, supervisor, width, height):
    from axe_playwright_python.sync_playwright import Axe

    scenario.build(analyst=analyst, analyst_b=analyst_b)
    dashboard_refresh(tenant_id=tenant.pk)
    page = new_page(width=width, height=height)
    csp = []
    page.on("console", lambda message: csp.append(message.text) if "Content Security Policy" in message.text else None)
    log_in(page, "supervisor")
    page.goto("/dashboard/")
    page.wait_for_load_state("networkidle")
    shot(page, f"dashboard-{width}")
    violations = Axe().run(page).response["violations"]
    bad = [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
           for v in violations if v["impact"] in ("serious", "critical")]
    assert not bad, (width, bad)
    assert not csp, csp
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{width} px: the page is {overflow} px wider than the window"
    charts = page.locator("svg.chart[role=img]")
    assert charts.count() == 7
    for index in range(charts.count()):
        assert charts.nth(index).bounding_box()["width"] <= width
    assert page.locator("table caption").count() == 8
    # Follow a number: the acknowledgements overdue (case B) open the queue listing that one case.
    page.locator("#deadlines tbody tr", has_text="Acknowledgement").locator("a").first.click()
    page.wait_for_url("**/?open=1&deadline=acknowledge&due=overdue")
    assert page.locator("#dashboard-filter").is_visible()
