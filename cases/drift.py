"""Drift checks of notice delivery (registered in ops.drift.CHECKS):

- dispatch_requested_not_started: an approved notice whose dispatch was requested (audit event
  cases.notice.dispatch_requested) ARBITER_OUTBOX_DRIFT_AFTER_SECONDS ago or more, with no
  NoticeDispatch row — the request's task never ran;
- notice_unsettled: a notice `unknown`, or `sending` past ARBITER_NOTICE_SENDING_STUCK_SECONDS, that
  an operator must settle (manage.py notice_settle, or the admin action)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from audit.models import AuditEvent
from cases.email_delivery import notices_unsettled
from cases.models import Notice, NoticeStatus
from ops.drift import DriftFinding


def _finding(check: str, message: str, objects: list[str]) -> DriftFinding:
    return DriftFinding(check, message, objects)


def check_dispatch_requested(*, tenant_id: int | None = None) -> list:
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
