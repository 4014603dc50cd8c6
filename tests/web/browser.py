"""What the browser tests share (their fixtures `browser` and `new_page` are in tests/web/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def log_in(page, username: str):
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-for-tests")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/")
    assert page.get_by_role("heading", name="Case queue").is_visible()


def keep_screenshot(page, name: str) -> None:
    """A full-page screenshot `<name>.png` in the folder ARBITER_SCREENSHOTS names, when it is set
    (none otherwise: no fixed path that two test processes would write at once)."""
    folder = os.environ.get("ARBITER_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
