"""Celery tasks of the cases app: thin interfaces that take ids, re-fetch, and call a service.

Every task may run twice (a redelivered message, a retry, two workers): it relies on the service's
own exactly-once guarantees and treats "already done" as success."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)

DISPATCHER_NAME = "notice-dispatcher"


@shared_task(bind=True)
def notice_dispatch_task(self, notice_id: int, actor_user_id: int | None = None) -> str:
    """Send an approved notice through cases.services.notice_dispatch.

    The actor is the user who asked for the dispatch (their role is checked again here, at send
    time) or, without one, the system dispatcher. Outcomes:
    - sent → "sent";
    - already sending/sent (a duplicate delivery, a double click) → Conflict → no-op "already-sent";
    - refused for good (no valid approval, withdrawn, deleted, a user who lost the right) → logged,
      "refused:<code>", not retried: retrying cannot make the refusal go away;
    - the send failed (notice now `failed`, retryable) → retried with exponential backoff, at most
      ARBITER_NOTICE_DISPATCH_MAX_RETRIES times; after that it stays `failed` for an operator."""
    from accounts.models import User
    from cases.models import Notice, NoticeStatus
    from cases.services import notice_dispatch
    from core.actors import Actor
    from core.errors import Conflict, DomainError

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
        result = notice_dispatch(actor=actor, notice=notice)
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


def notice_dispatch_enqueue(*, notice_id: int, actor_user_id: int | None = None) -> None:
    """Queue the dispatch once the current transaction commits (pretix pattern): a worker must
    never pick up a notice whose approval has not been committed yet, and a rolled-back approval
    must queue nothing."""
    transaction.on_commit(lambda: notice_dispatch_task.delay(notice_id, actor_user_id))


# --- issue 7 (i7): deadlines and evidence extraction --------------------------------------------

@shared_task
def deadline_crossings_task() -> int:
    """Beat: record `deadline.due_soon` / `deadline.overdue` once per crossing (the service's
    unique DeadlineCrossing makes a second run, or two beats at once, record nothing more)."""
    from cases.services.deadlines import deadline_crossings_record

    return deadline_crossings_record()


@shared_task
def evidence_extract_task(evidence_id: int) -> str:
    """Extract the text of an uploaded PDF (cases.extraction). May run twice: a done row is left as it is."""
    from cases.extraction import evidence_extraction_run

    row = evidence_extraction_run(evidence_id=evidence_id)
    return row.status if row is not None else "none"


def evidence_extract_enqueue(*, evidence_id: int) -> None:
    """Queue the extraction once the upload's transaction commits (the one place it is enqueued,
    so an outbox can take over here)."""
    transaction.on_commit(lambda: evidence_extract_task.delay(evidence_id))
