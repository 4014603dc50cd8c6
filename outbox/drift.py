"""Drift checks of the outbox and of notice dispatch (registered in runs.drift.CHECKS):

- outbox_backlog: an outbox row not relayed ARBITER_OUTBOX_DRIFT_AFTER_SECONDS after it was written
  (the broker has been down that long, or no relay runs: no worker, no beat);
- dispatch_requested_not_started: an approved notice whose dispatch was requested (audit event
  cases.notice.dispatch_requested) that long ago, with no NoticeDispatch row — the request's task
  never ran;
- beat_missing: celery beat's heartbeat is older than ARBITER_BEAT_MISSING_AFTER_SECONDS: the
  workers still recover runs, but beat's hourly and daily jobs wait;
- notice_unsettled: a notice `unknown`, or `sending` past ARBITER_NOTICE_SENDING_STUCK_SECONDS, that
  an operator must settle (manage.py notice_settle, or the admin action)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from outbox.selectors import outbox_pending


def _finding(check: str, message: str, objects: list[str]):
    from runs.drift import DriftFinding  # runs sits above outbox in the layering: import when called

    return DriftFinding(check, message, objects)


def check_outbox_backlog(*, tenant_id: int | None = None) -> list:
    """Outbox rows carry no tenant (a task's kwargs name its objects, of any tenant): a stuck
    broker is everybody's problem, so they are reported whatever `tenant_id` says."""
    threshold = settings.ARBITER_OUTBOX_DRIFT_AFTER_SECONDS
    found = []
    for row in outbox_pending(older_than_seconds=threshold)[:200]:
        error = f" Last error: {row.last_error}" if row.last_error else ""
        found.append(_finding(
            "outbox_backlog",
            f"Outbox O{row.pk} ({row.task} {row.kwargs}) written {row.created_at:%Y-%m-%d %H:%M:%S} UTC is not "
            f"published after {row.attempts} attempt(s).{error} Check the broker and that a worker or beat runs "
            f"(the admin's 'relay now' retries it at once).", [f"outbox:{row.pk}"]))
    return found


def check_dispatch_requested(*, tenant_id: int | None = None) -> list:
    from audit.models import AuditEvent
    from cases.models import Notice, NoticeStatus

    horizon = timezone.now() - timedelta(seconds=settings.ARBITER_OUTBOX_DRIFT_AFTER_SECONDS)
    notices = Notice.objects.filter(status=NoticeStatus.APPROVED, dispatch__isnull=True)
    if tenant_id is not None:
        notices = notices.filter(tenant_id=tenant_id)
    notices = {str(n.pk): n for n in notices.select_related("case")}
    if not notices:
        return []
    requests = (AuditEvent.objects.filter(action="cases.notice.dispatch_requested", target_type="notice",
                                          target_id__in=list(notices), created_at__lt=horizon)
                .order_by("created_at").values_list("target_id", "created_at"))
    found, seen = [], set()
    for target_id, requested_at in requests:
        if target_id in seen:
            continue
        seen.add(target_id)
        notice = notices[target_id]
        found.append(_finding(
            "dispatch_requested_not_started",
            f"Notice N{notice.pk} on {notice.case.reference} was asked to be sent at {requested_at:%Y-%m-%d %H:%M:%S} "
            f"UTC and is still approved with no dispatch: its task never ran. Check the outbox and the workers, "
            f"or send it again.", [f"notice:{notice.pk}", f"case:{notice.case.reference}"]))
    return found


def check_notice_unsettled(*, tenant_id: int | None = None) -> list:
    from cases.email_delivery import notices_unsettled

    found = []
    for notice in notices_unsettled(tenant_id=tenant_id):
        dispatch = getattr(notice, "dispatch", None)
        message_id = dispatch.message_id if dispatch else "?"
        found.append(_finding(
            "notice_unsettled",
            f"Notice N{notice.pk} on {notice.case.reference} is {notice.status}: whether its email went out is "
            f"unknown. Look for Message-ID {message_id} in the mail log, then settle it: manage.py notice_settle "
            f"{notice.pk} --sent --message-id '{message_id}' --reason ... (or --failed --reason ...).",
            [f"notice:{notice.pk}", f"case:{notice.case.reference}"]))
    return found


def check_beat_missing(*, tenant_id: int | None = None) -> list:
    """Beat serves every tenant: reported whatever `tenant_id` says. A beat that never ran on this
    database is not drift (a fresh install, tests); /readyz says so as `degraded`."""
    from outbox.health import beat_missing

    reason = beat_missing(never_seen_is_missing=False)
    return [_finding("beat_missing", f"{reason[0].upper()}{reason[1:]}.", ["beat"])] if reason else []
