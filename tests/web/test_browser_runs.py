"""End to end in Debian's Chromium (Playwright's sync API, no downloaded browser): an analyst starts
an analysis from the case page and inspects what the agent saw at step 3; a chat message becomes a
pending reply and then an answer with a proposal that needs approval. No Celery worker runs in
tests: the test drives each run through the executor between page checks, as a worker would, and
the pages' htmx polling shows the progress."""

import os
import shutil

import pytest
from playwright.sync_api import expect

# Playwright's sync API runs an asyncio loop in this thread; the ORM calls the tests make between
# browser steps are plain synchronous calls, so Django's async-safety guard is lifted here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from cases.models import Proposal, ProposalStatus  # noqa: E402
from conversations.models import Message  # noqa: E402
from runs.models import AgentRun, RunStatus  # noqa: E402
from tests.factories import make_case  # noqa: E402
from tests.helpers import bring_case_to  # noqa: E402
from tests.runs.conftest import drive  # noqa: E402
from tests.web.browser import CHROMIUM, keep_screenshot, log_in  # noqa: E402,F401  (log_in: used by other modules too)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    """The live server enqueues steps after commit; here they are only recorded (no broker, no worker)."""
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls




def test_an_analyst_runs_an_analysis_and_sees_what_the_agent_saw_at_step_3(new_page, db_turn, analyst, enqueued):
    case = make_case(actor=analyst, title="Card charged twice for one purchase")
    page = new_page()
    log_in(page, "analyst")
    page.goto(f"/cases/{case.reference}/")
    page.get_by_role("button", name="Analyse with agents").click()
    page.locator("#flash", has_text="queued").wait_for()
    run = AgentRun.objects.get(case=case)
    assert enqueued == [run.pk] and run.status == RunStatus.QUEUED
    runs = page.locator("#case-runs")
    runs.get_by_text("Queued").wait_for()
    assert "position 1 in the queue" in runs.inner_text()

    # The inspector while the run waits: queued, polling.
    runs.get_by_role("link", name=f"R{run.pk}").click()
    page.wait_for_url(f"**/runs/{run.pk}/")
    assert "position 1 in your organisation's queue" in page.locator("#run-status").inner_text()

    # A worker executes the run (here: the test, through the executor); the page follows by itself.
    with db_turn():
        drive(run)
    page.locator("#run-status-badge", has_text="Completed").wait_for()
    steps = page.locator("#steps tbody tr")
    assert steps.count() == 8
    assert "Phase: Done" in page.locator("#run-status").inner_text()
    assert page.locator("#findings tbody tr").count() > 0 and page.locator("#artifacts article").count() > 0
    proposals = page.locator("#run-proposals")
    assert "Proposal P" in proposals.inner_text() and "a supervisor decides" in proposals.inner_text()
    keep_screenshot(page, "arbiter-run")

    # One click: what the agent saw at step 3.
    page.locator("#step-3").get_by_role("link", name="What it saw at step 3").click()
    page.wait_for_url(f"**/runs/{run.pk}/steps/3/")
    assert "risk_assessor" in page.get_by_role("heading", level=1).inner_text()
    untrusted = page.locator("#model-calls .untrusted[data-kind='evidence']")
    assert untrusted.count() == 1 and "charged" in untrusted.inner_text()
    evidence = case.evidence.get()
    assert f"E{evidence.pk} {evidence.sha256[:12]}" in page.locator("#model-calls .refs").inner_text()
    assert "risk_level" in page.locator("#model-calls pre.output").last.inner_text()
    assert "policy_checker" in page.locator("#checkpoint").inner_text()  # the plan continues there
    keep_screenshot(page, "arbiter-run-step")
    case.refresh_from_db()
    assert (case.status, case.risk_level) == ("new", "unassessed")  # agents only proposed


def test_a_chat_request_shows_a_pending_reply_then_the_proposal_and_approval_required(new_page, db_turn, analyst,
                                                                                     supervisor):
    case = make_case(actor=analyst, title="Refund refused after a duplicate charge")
    bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    page = new_page()
    log_in(page, "analyst")
    page.goto(f"/cases/{case.reference}/")
    page.locator("#thread-new summary").click()
    page.locator("#thread-new").get_by_label("Title").fill("Closing this case")
    page.get_by_role("button", name="Open thread").click()
    page.wait_for_url("**/threads/*/")
    assert page.get_by_role("heading", name="Closing this case").is_visible()

    page.get_by_label("Your message").fill("please close the case")
    page.get_by_role("button", name="Send").click()
    pending = page.locator("#thread-pending")
    pending.get_by_text("The assistant is replying to #1").wait_for()
    assert page.locator("#message-1").get_by_text("please close the case").is_visible()
    question = Message.objects.get(thread__case=case, sequence=1)

    with db_turn():
        drive(AgentRun.objects.get(pk=int(question.reply_run_id)))
    answer = page.locator("#message-2")
    answer.wait_for()
    expect(page.locator("#thread-pending .pending-reply")).to_have_count(0)  # polls without eval (CSP)
    proposal = Proposal.objects.get(case=case, status=ProposalStatus.PENDING)
    text = answer.inner_text()
    assert f"Proposal P{proposal.pk}" in text and "Approval required by a supervisor." in text
    assert "Cited:" in text and "decided" in text
    case.refresh_from_db()
    assert case.status == "decided"  # the intent is a proposal, not a change
    keep_screenshot(page, "arbiter-thread")
