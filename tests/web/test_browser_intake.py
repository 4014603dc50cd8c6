"""Importing complaints in Debian's Chromium: a supervisor uploads a CFPB file, the worker (played
by the test) imports it, and the page's progress block turns into the finished counts without a
reload. The upload page at 1440 and 390 px, screenshots of both, and axe-core on both pages."""

import os
import shutil

import pytest

# Playwright's sync API runs an asyncio loop in this thread; the ORM calls the tests make between
# browser steps are plain synchronous calls, so Django's async-safety guard is lifted here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from intake.models import ComplaintImport  # noqa: E402
from intake.tasks import complaint_import_task  # noqa: E402
from tests.intake.conftest import FIXED_ROWS, csv_bytes  # noqa: E402
from tests.web.browser import CHROMIUM, log_in  # noqa: E402

SCREENSHOTS = {1440: "/tmp/arbiter-imports-1440.png", 390: "/tmp/arbiter-imports-390.png"}
DONE_SCREENSHOT = "/tmp/arbiter-import-done-1440.png"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """No broker in tests: the outbox's publish is recorded; the test plays the worker."""
    published = []
    monkeypatch.setattr("outbox.services.publish", lambda task, kwargs: published.append((task, kwargs)))
    return published


def serious(axe, page) -> list[str]:
    violations = axe.run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {v['help']}" for v in violations if v["impact"] in ("serious", "critical")]


def test_a_supervisor_imports_a_file_and_watches_it_finish(new_page, supervisor, tmp_path, no_broker):
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    path = tmp_path / "complaints.csv"
    path.write_bytes(csv_bytes(FIXED_ROWS))
    page = new_page(width=1440, height=900)
    log_in(page, "supervisor")
    page.get_by_role("link", name="Imports").click()
    page.get_by_role("heading", name="Import complaints").wait_for()
    assert serious(axe, page) == []
    page.screenshot(path=SCREENSHOTS[1440], full_page=True)

    page.get_by_label("CFPB complaints file (CSV)").set_input_files(str(path))
    page.get_by_role("button", name="Import").click()
    page.get_by_role("heading", name="Import of complaints.csv").wait_for()
    started = ComplaintImport.objects.get()
    assert no_broker == [("intake.tasks.complaint_import_task", {"import_id": started.pk})]
    page.locator("#import-progress", has_text="Waiting for a worker").wait_for()

    assert complaint_import_task(started.pk) == "done"
    page.locator("#import-progress h2", has_text="Finished").wait_for()  # the poll, no reload
    assert page.locator("#import-created").inner_text() == "2"
    assert page.locator("#import-errors").inner_text() == "5"
    assert page.get_by_role("link", name="Download the 5 bad rows (CSV)").is_visible()
    assert serious(axe, page) == []
    page.screenshot(path=DONE_SCREENSHOT, full_page=True)


def test_the_upload_page_at_390_px_fits_and_passes_axe(new_page, supervisor):
    from axe_playwright_python.sync_playwright import Axe

    page = new_page(width=390, height=844)
    log_in(page, "supervisor")
    page.goto("/imports/")
    page.get_by_role("heading", name="Import complaints").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert serious(Axe(), page) == []
    page.screenshot(path=SCREENSHOTS[390], full_page=True)
