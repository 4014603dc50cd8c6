"""Celery tasks of the cases app: thin interfaces that take ids, re-fetch, and call a service.

Every task may run twice (a redelivered message, a retry, two workers): it relies on the service's
own exactly-once guarantees and treats "already done" as success."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from accounts.models import User
from cases import services
from cases.extraction import evidence_extraction_run
from cases.models import Notice, NoticeStatus
from cases.services.deadlines import deadline_crossings_record
from cases.services.dispatch import notice_dispatch_redeliver_lost
from core.actors import Actor
from core.errors import Conflict, DomainError

logger = logging.getLogger(__name__)

DISPATCHER_NAME = "notice-dispatcher"


# A database error (the database restarting, a dropped connection) retries the task with backoff
# (1, 2, 4 ... 30 s, 10 times) instead of dropping the message: the service is safe to re-run.
@shared_task(bind=True, acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, retry_jitter=False, max_retries=10)
def notice_dispatch_task(self, notice_id: int, actor_user_id: int | None = None) -> str:
    """Send an approved notice through cases.services.notice_dispatch.

    The actor is the user who asked for the dispatch (their role is checked again here, at send
    time) or, without one, the system dispatcher. Outcomes:
    - sent → "sent";
    - already sending/sent (a duplicate delivery, a double click) → Conflict → no-op "already-sent";
    - refused for good (no valid approval, withdrawn, deleted, a user who lost the right) → logged,
      "refused:<code>", not retried: retrying cannot make the refusal go away;
    - the send failed (notice now `failed`, retryable) → retried with exponential backoff, at most
      ARBITER_NOTICE_DISPATCH_MAX_RETRIES times; after that it stays `failed` for an operator;
    - the outcome is unknown (notice now `unknown`: the server may have it) → "unknown", never
      retried: an operator settles it (notice_settle);
    - the database is unreachable → the task is retried with backoff (autoretry_for)."""
    notice = Notice.objects.filter(pk=notice_id).first()
    if notice is None:
        logger.warning("notice_dispatch_task: notice %s does not exist; nothing to send", notice_id)
        return "refused:not_found"
    if actor_user_id is None:
        actor = Actor.system(DISPATCHER_NAME)
    else:
        user = User.objects.filter(pk=actor_user_id, is_active=True).first()
        if user is None:
            logger.warning("notice_dispatch_task: user %s is gone or inactive; notice %s not sent",
                           actor_user_id, notice_id)
            return "refused:no_actor"
        actor = Actor.for_user(user)

    try:
        result = services.notice_dispatch(actor=actor, notice=notice)
    except Conflict as exc:
        logger.info("notice_dispatch_task: notice %s: %s (no-op)", notice_id, exc.message)
        return "already-sent"
    except DomainError as exc:
        logger.warning("notice_dispatch_task: notice %s refused (%s): %s", notice_id, exc.code, exc.message)
        return f"refused:{exc.code}"

    if result.status == NoticeStatus.FAILED:
        max_retries = settings.ARBITER_NOTICE_DISPATCH_MAX_RETRIES
        if self.request.retries >= max_retries:
            logger.error("notice_dispatch_task: notice %s still failing after %s retries; left failed for an "
                         "operator", notice_id, self.request.retries)
            return "failed"
        countdown = settings.ARBITER_NOTICE_DISPATCH_RETRY_BACKOFF_SECONDS * (2 ** self.request.retries)
        raise self.retry(countdown=countdown, max_retries=max_retries)
    return result.status


# --- deadlines and evidence extraction --------------------------------------------

@shared_task
def deadline_crossings_task() -> int:
    """Beat: record `deadline.due_soon` / `deadline.overdue` once per crossing (the service's
    unique DeadlineCrossing makes a second run, or two beats at once, record nothing more)."""
    return deadline_crossings_record()


@shared_task
def evidence_extract_task(evidence_id: int) -> str:
    """Extract the text of an uploaded PDF (cases.extraction). May run twice: a done row is left as it is."""
    row = evidence_extraction_run(evidence_id=evidence_id)
    return row.status if row is not None else "none"


# --- dispatch through the outbox ---------------------------------------------------

def notice_dispatch_publish(*, notice_id: int, actor_user_id: int | None = None) -> None:
    """How the outbox relay hands a dispatch to the broker (outbox.services.PUBLISHERS)."""
    notice_dispatch_task.delay(notice_id, actor_user_id)


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def notice_dispatch_redeliver_task(self) -> list[int]:
    """Beat: publish again dispatches whose task the broker lost (cases.services.dispatch)."""
    return notice_dispatch_redeliver_lost(older_than_seconds=settings.ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS)
