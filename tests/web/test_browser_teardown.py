"""Regression: a request the live server is still serving when a browser test ends
must not race the database flush ("database table is locked" in test_browser's
test_a_supervisor_approves_an_agent_proposal_from_the_inbox, about 1 run in 9).

The case page's threads section loads itself (hx-trigger="load") after every swap; here that
request is made slow and holds an open query, so without tests/web/conftest.py's
quiet_live_server the flush at teardown fails every time (checked), not 1 time in 9."""

import os
import time

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from tests.web import test_browser as browser_tests  # noqa: E402

pytestmark = browser_tests.pytestmark


@pytest.fixture
def slow_threads_section(monkeypatch):
    """The threads section answers late, iterating a query (a statement open on the shared
    SQLite connection) while the test has already finished."""
    from django.contrib.contenttypes.models import ContentType

    import web.urls

    pattern = next(p for p in web.urls.urlpatterns if getattr(p, "name", "") == "case_threads")
    original = pattern.callback

    def slow(request, *args, **kwargs):
        response = original(request, *args, **kwargs)
        for _ in ContentType.objects.all().iterator(chunk_size=1):
            time.sleep(0.02)
        return response

    monkeypatch.setattr(pattern, "callback", slow)


@pytest.mark.usefixtures("slow_threads_section")
def test_a_request_still_served_after_the_last_assertion_does_not_race_the_flush(new_page, analyst, supervisor,
                                                                                 agent):
    browser_tests.test_a_supervisor_approves_an_agent_proposal_from_the_inbox(new_page, analyst, supervisor, agent)
