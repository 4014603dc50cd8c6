"""No duplicates from natural retries (in process, SQLite and PostgreSQL): a crash between an
agent's notice draft and its submission, a redelivered task message, a retried chat post."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from cases import services as case_services
from cases.models import CaseEvent, Notice, NoticeStatus
from cases.tasks import notice_dispatch_task
from conversations import services as chat_services
from conversations.models import Message
from runs import services as run_services
from runs.executor import run_step
from runs.models import AgentRun, RunStatus, ToolCall, ToolCallStatus
from runs.tools import TOOLS, Tool
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append((run_id, kw)))
    return calls


class WorkerDied(BaseException):
    """Stands for a SIGKILL: nothing after it runs, nothing catches it."""


def test_a_crash_between_draft_and_submit_puts_the_notice_in_the_inbox_once(analyst, case, monkeypatch):
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = run_services.run_start(actor=analyst, case=case)
    real = TOOLS["notice_submit"]

    def die(invocation):
        raise WorkerDied()

    monkeypatch.setitem(TOOLS, "notice_submit", Tool(real.name, real.effect_type, real.description, perform=die,
                                                     reconcile=real.reconcile))
    with pytest.raises(WorkerDied):
        drive(run, worker_id="w1")
    notice = Notice.objects.get(case=case)
    assert notice.status == NoticeStatus.DRAFT  # drafted, never submitted: the worker died in between
    run.refresh_from_db()
    assert run.current_node == "notice_drafter" and run.lease_owner == "w1"

    # The lease lapses; another worker retries the step with the real tool.
    monkeypatch.setitem(TOOLS, "notice_submit", real)
    AgentRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    run = drive(run, worker_id="w2")
    assert run.status == RunStatus.COMPLETED, run.error
    notice.refresh_from_db()
    assert Notice.objects.filter(case=case).count() == 1 and notice.status == NoticeStatus.PENDING_APPROVAL
    assert CaseEvent.objects.filter(case=case, event_type="notice.drafted").count() == 1
    assert CaseEvent.objects.filter(case=case, event_type="notice.submitted").count() == 1
    step = run.steps.get(node="notice_drafter")
    assert step.summary == "Notice drafted and awaiting approval."
    calls = ToolCall.objects.filter(run=run, tool__in=["notice_draft", "notice_submit"])
    assert sorted(calls.values_list("tool", "status")) == [("notice_draft", ToolCallStatus.SUCCEEDED),
                                                           ("notice_submit", ToolCallStatus.SUCCEEDED)]


def test_a_redelivered_step_message_does_nothing(analyst, case):
    run = run_services.run_start(actor=analyst, case=case)
    first = run_step(run_id=run.pk, worker_id="w1", expected_sequence=None, enqueue=False)
    assert first.action == "executed"
    run.refresh_from_db()
    steps = run.steps.count()
    with assert_nothing_changed(case, extra={"steps": lambda: run.steps.count()}):
        again = run_step(run_id=run.pk, worker_id="w2", expected_sequence=first.sequence, enqueue=False)
    assert again.action == "stale" and run.steps.count() == steps


def test_a_redelivered_dispatch_message_sends_nothing_twice(analyst, supervisor, case, mailoutbox):
    notice = case_services.notice_draft(actor=analyst, case=case, subject="s", body="b")
    case_services.notice_submit(actor=analyst, notice=notice)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    assert notice_dispatch_task.apply(args=[notice.pk, analyst.pk]).get() == "sent"
    with assert_nothing_changed(case):
        assert notice_dispatch_task.apply(args=[notice.pk, analyst.pk]).get() == "already-sent"
    assert len(mailoutbox) == 1


def test_a_retried_chat_post_is_the_same_message_and_run(analyst, case):
    thread = chat_services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Q")
    first = chat_services.message_post(actor=analyst, thread=thread, content="Is the refund due?")
    with assert_nothing_changed(case, extra={"messages": lambda: Message.objects.count(),
                                             "runs": lambda: AgentRun.objects.count()}):
        again = chat_services.message_post(actor=analyst, thread=thread, content="Is the refund due?")
    assert again.pk == first.pk and again.reply_run_id == first.reply_run_id
    # Outside the window it is a new question; and a different text is always a new message.
    with mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(minutes=5)):
        later = chat_services.message_post(actor=analyst, thread=thread, content="Is the refund due?")
    other = chat_services.message_post(actor=analyst, thread=thread, content="And the fee?")
    assert len({first.pk, later.pk, other.pk}) == 3


def test_a_form_token_makes_a_chat_post_idempotent(analyst, supervisor, case):
    thread = chat_services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Q")
    first = chat_services.message_post(actor=analyst, thread=thread, content="Next step?", client_token="tok-1")
    chat_services.message_post(actor=supervisor, thread=thread, content="Waiting for evidence.")
    with assert_nothing_changed(case, extra={"messages": lambda: Message.objects.count()}):
        again = chat_services.message_post(actor=analyst, thread=thread, content="Next step?", client_token="tok-1")
    assert again.pk == first.pk
