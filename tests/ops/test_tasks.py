"""cases.tasks.notice_dispatch_task: thin, idempotent, retried only when a retry can help, and
queued only after the transaction that asked for it commits."""

import pytest
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.db import transaction

from audit.models import AuditEvent
from cases import services
from cases.models import DispatchStatus, NoticeDispatch, NoticeStatus
from cases.task_queue import notice_dispatch_enqueue
from cases.tasks import notice_dispatch_task
from tests.helpers import assert_nothing_changed


class BrokenBackend(BaseEmailBackend):
    """An SMTP server that is down."""

    def send_messages(self, email_messages):
        raise ConnectionRefusedError("SMTP server refused the connection")


def _pending_notice(case, analyst):
    notice = services.notice_draft(actor=analyst, case=case, subject="Your complaint",
                                   body="We have received your complaint.")
    return services.notice_submit(actor=analyst, notice=notice)


@pytest.fixture
def approved_notice(case, analyst, supervisor):
    notice = _pending_notice(case, analyst)
    return services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)


def _sent_events(notice):
    return AuditEvent.objects.filter(action="cases.notice.sent", target_id=str(notice.pk))


def test_running_the_task_twice_sends_one_email(approved_notice):
    first = notice_dispatch_task.apply(args=[approved_notice.pk]).get()
    second = notice_dispatch_task.apply(args=[approved_notice.pk]).get()

    assert (first, second) == ("sent", "already-sent")
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == [approved_notice.recipient]
    approved_notice.refresh_from_db()
    assert approved_notice.status == NoticeStatus.SENT
    dispatch = NoticeDispatch.objects.get(notice=approved_notice)
    assert (dispatch.status, dispatch.attempts) == (DispatchStatus.SENT, 1)
    assert approved_notice.external_message_id == dispatch.message_id
    assert mail.outbox[0].extra_headers["Message-ID"] == dispatch.message_id
    assert _sent_events(approved_notice).count() == 1


def test_without_a_user_the_system_dispatcher_is_the_actor(approved_notice):
    notice_dispatch_task.apply(args=[approved_notice.pk]).get()

    assert _sent_events(approved_notice).get().actor_id == "system:notice-dispatcher"


def test_with_a_user_the_user_is_the_actor_and_their_role_is_checked(approved_notice, analyst):
    notice_dispatch_task.apply(args=[approved_notice.pk, analyst.pk]).get()

    assert _sent_events(approved_notice).get().actor_id == f"user:{analyst.pk}"


def test_a_user_without_the_right_to_send_is_refused_and_nothing_changes(approved_notice, auditor, case):
    with assert_nothing_changed(case):
        result = notice_dispatch_task.apply(args=[approved_notice.pk, auditor.pk]).get()

    assert result == "refused:forbidden"
    approved_notice.refresh_from_db()
    assert approved_notice.status == NoticeStatus.APPROVED


def test_an_unapproved_notice_is_refused_not_retried_and_nothing_changes(case, analyst, monkeypatch):
    notice = _pending_notice(case, analyst)
    retries = []
    monkeypatch.setattr(notice_dispatch_task, "retry", lambda *a, **kw: retries.append(kw))

    with assert_nothing_changed(case):
        result = notice_dispatch_task.apply(args=[notice.pk]).get()

    assert result == "refused:not_allowed"
    assert retries == []
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.PENDING_APPROVAL


def test_a_missing_notice_is_a_logged_no_op(db):
    assert notice_dispatch_task.apply(args=[987654]).get() == "refused:not_found"
    assert len(mail.outbox) == 0


def test_a_failed_send_is_retried_with_exponential_backoff(approved_notice, settings, monkeypatch):
    settings.EMAIL_BACKEND = "tests.ops.test_tasks.BrokenBackend"
    settings.ARBITER_NOTICE_DISPATCH_RETRY_BACKOFF_SECONDS = 7
    requested = []

    class Retry(Exception):
        pass

    def fake_retry(*args, countdown, max_retries, **kwargs):
        requested.append((countdown, max_retries))
        return Retry()

    monkeypatch.setattr(notice_dispatch_task, "retry", fake_retry)

    with pytest.raises(Retry):
        notice_dispatch_task.apply(args=[approved_notice.pk], retries=2, throw=True).get()

    assert requested == [(7 * 4, settings.ARBITER_NOTICE_DISPATCH_MAX_RETRIES)]
    approved_notice.refresh_from_db()
    assert approved_notice.status == NoticeStatus.FAILED
    dispatch = NoticeDispatch.objects.get(notice=approved_notice)
    assert dispatch.status == DispatchStatus.FAILED
    assert "refused the connection" in dispatch.last_error
    assert len(mail.outbox) == 0


def test_retries_really_resend_and_stop_at_the_maximum(approved_notice, settings, monkeypatch):
    # Eager apply() that does not propagate runs each retry at once (countdown ignored):
    # 1 attempt + 2 retries, then the task gives up and leaves the notice failed.
    monkeypatch.setitem(notice_dispatch_task.app.conf, "task_eager_propagates", False)
    settings.EMAIL_BACKEND = "tests.ops.test_tasks.BrokenBackend"
    settings.ARBITER_NOTICE_DISPATCH_MAX_RETRIES = 2

    result = notice_dispatch_task.apply(args=[approved_notice.pk])

    assert result.get() == "failed"

    dispatch = NoticeDispatch.objects.get(notice=approved_notice)
    assert (dispatch.status, dispatch.attempts) == (DispatchStatus.FAILED, 3)
    assert AuditEvent.objects.filter(action="cases.notice.dispatch_failed",
                                     target_id=str(approved_notice.pk)).count() == 3


def test_a_retry_after_the_server_recovers_sends_once(approved_notice, settings):
    settings.EMAIL_BACKEND = "tests.ops.test_tasks.BrokenBackend"
    settings.ARBITER_NOTICE_DISPATCH_MAX_RETRIES = 0
    assert notice_dispatch_task.apply(args=[approved_notice.pk]).get() == "failed"

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notice_dispatch_task.apply(args=[approved_notice.pk]).get() == "sent"

    assert len(mail.outbox) == 1
    dispatch = NoticeDispatch.objects.get(notice=approved_notice)
    assert (dispatch.status, dispatch.attempts) == (DispatchStatus.SENT, 2)


@pytest.fixture
def queued(monkeypatch):
    """Record what would reach the broker instead of sending it."""
    calls = []
    monkeypatch.setattr(notice_dispatch_task, "delay", lambda *args: calls.append(args))
    return calls


def test_enqueue_waits_for_the_commit(approved_notice, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        notice_dispatch_enqueue(notice_id=approved_notice.pk, actor_user_id=None)
        assert queued == []  # nothing reaches the broker inside the transaction

    assert len(callbacks) == 1
    callbacks[0]()
    assert queued == [(approved_notice.pk, None)]


def test_enqueue_after_approval_in_one_transaction_queues_once_on_commit(
        case, analyst, supervisor, queued, django_capture_on_commit_callbacks):
    notice = _pending_notice(case, analyst)
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
            notice_dispatch_enqueue(notice_id=notice.pk, actor_user_id=supervisor.pk)
            assert queued == []

    assert queued == [(notice.pk, supervisor.pk)]


def test_a_rolled_back_transaction_queues_nothing(approved_notice, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                notice_dispatch_enqueue(notice_id=approved_notice.pk)
                raise RuntimeError("the approval failed after all")

    assert callbacks == []
    assert queued == []
    assert len(mail.outbox) == 0
