"""Sending an approved notice, exactly once."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.core.mail.message import make_msgid
from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from cases import policy
from cases.models import (
    Approval,
    ApprovalDecision,
    DispatchStatus,
    Notice,
    NoticeDispatch,
    NoticeStatus,
)
from cases.services._common import _lock_case, _record, _require_role, _require_tenant
from cases.services.notices import _lock_notice
from core.actors import Actor, coerce_actor
from core.errors import Conflict, Forbidden, NotAllowed

logger = logging.getLogger(__name__)






def _valid_approval(notice: Notice) -> Approval | None:
    return (Approval.objects.filter(notice=notice, decision=ApprovalDecision.APPROVED, voided_at__isnull=True,
                                    content_hash=notice.content_hash).order_by("-created_at").first())


def _check_dispatchable(notice: Notice) -> Approval:
    """What must hold for a notice to be sent; returns the approval that authorises it."""
    if notice.status in (NoticeStatus.SENDING, NoticeStatus.SENT):
        raise Conflict(f"This notice is already {notice.get_status_display().lower()}; it is sent only once.")
    if notice.status not in (NoticeStatus.APPROVED, NoticeStatus.FAILED):
        raise NotAllowed(f"Only an approved notice can be sent; this one is "
                         f"{notice.get_status_display().lower()}.")
    if notice.compute_content_hash() != notice.content_hash:
        raise NotAllowed("The notice's content does not match its recorded hash; it needs a new approval.")
    approval = _valid_approval(notice)
    if approval is None:
        raise NotAllowed("This notice has no valid approval of its current content; submit it for approval.")
    return approval


def _check_dispatcher(actor: Actor, notice: Notice) -> None:
    if actor.is_user:
        _require_role(actor, policy.CAN_DISPATCH_NOTICES, "send notices")
        _require_tenant(actor, notice.tenant_id)
    elif actor.is_agent:
        raise Forbidden("Agents cannot send notices; an approved notice is sent by a person or the system.")


@transaction.atomic
def notice_dispatch_request(*, actor, notice: Notice) -> Notice:
    """A person asks for an approved notice to be sent: the checks `notice_dispatch` will make are
    made now (so a refusal is immediate and queues nothing), the request is audited, and the
    dispatch task is queued once this transaction commits. The worker's `notice_dispatch` stays
    the only judge and the only sender; a double click queues two tasks of which one sends."""
    actor = coerce_actor(actor)
    _check_dispatcher(actor, notice)
    case = _lock_case(notice.case_id)
    locked = _lock_notice(notice)
    approval = _check_dispatchable(locked)
    audit_record(
        tenant_id=case.tenant_id, case_id=case.pk, actor_type=actor.kind, actor_id=actor.identifier,
        action="cases.notice.dispatch_requested", target_type="notice", target_id=locked.pk,
        policy_version=policy.POLICY_VERSION, decision="allowed",
        payload={"notice_id": locked.pk, "approval_id": approval.pk, "content_hash": locked.content_hash})
    from cases.tasks import notice_dispatch_enqueue  # tasks import services; import late to avoid a cycle

    notice_dispatch_enqueue(notice_id=locked.pk, actor_user_id=actor.user.pk if actor.is_user else None)
    return locked


def notice_dispatch(*, actor, notice: Notice) -> Notice:
    """Send an approved notice by email, exactly once.

    1. Claim (one transaction): lock the notice row; it must be approved (or failed, for a retry)
       with a valid approval of its current content hash; move it to `sending` and create its
       NoticeDispatch (unique per notice) with the Message-ID the email will carry. A concurrent
       dispatcher waits on the row lock, then finds it `sending`/`sent` and gets a Conflict.
    2. Send through Django's email backend, outside any transaction (no lock held over I/O).
    3. Record (one transaction): `sent` with the message id, or `failed` (retryable) with the error.

    A worker that dies between 1 and 3 leaves the notice `sending`: it is never re-sent blindly;
    the drift report shows it for an operator to reconcile with the mail log by its Message-ID.
    Refuses agents (Forbidden), unapproved or edited-after-approval notices (NotAllowed)."""
    actor = coerce_actor(actor)
    _check_dispatcher(actor, notice)

    with transaction.atomic():
        case = _lock_case(notice.case_id)
        locked = _lock_notice(notice)
        approval = _check_dispatchable(locked)
        dispatch = NoticeDispatch.objects.filter(notice=locked).first()
        if dispatch is None:
            dispatch = NoticeDispatch.objects.create(
                tenant_id=locked.tenant_id, notice=locked, approval=approval, content_hash=locked.content_hash,
                message_id=make_msgid(idstring=f"notice-{locked.pk}", domain=settings.NOTICE_MESSAGE_ID_DOMAIN),
                dispatched_by=actor.identifier)
        dispatch.attempts += 1
        dispatch.status = DispatchStatus.SENDING
        dispatch.approval = approval
        dispatch.save()
        locked.start_sending()
        locked.save()
        _record(case=case, actor=actor, event_type="notice.sending",
                payload={"notice_id": locked.pk, "message_id": dispatch.message_id, "attempt": dispatch.attempts},
                audit_action="cases.notice.dispatch_started", target_type="notice", target_id=locked.pk)

    error = ""
    try:
        message = EmailMessage(subject=locked.subject, body=locked.body, from_email=settings.DEFAULT_FROM_EMAIL,
                               to=[locked.recipient],
                               headers={"Message-ID": dispatch.message_id, "X-Arbiter-Case": case.reference,
                                        "X-Arbiter-Notice": str(locked.pk)})
        get_connection(fail_silently=False).send_messages([message])
    except Exception as exc:  # any transport failure is recorded and retryable
        logger.warning("notice %s dispatch failed: %s", locked.pk, exc)
        error = f"{type(exc).__name__}: {exc}"

    with transaction.atomic():
        case = _lock_case(notice.case_id)
        locked = _lock_notice(notice)
        dispatch = NoticeDispatch.objects.select_for_update().get(notice=locked)
        if error:
            locked.mark_failed()
            dispatch.status = DispatchStatus.FAILED
            dispatch.last_error = error
            event_type, action = "notice.failed", "cases.notice.dispatch_failed"
        else:
            locked.mark_sent()
            locked.sent_at = timezone.now()
            locked.external_message_id = dispatch.message_id
            dispatch.status = DispatchStatus.SENT
            dispatch.sent_at = locked.sent_at
            dispatch.last_error = ""
            event_type, action = "notice.sent", "cases.notice.sent"
        locked.save()
        dispatch.save()
        _record(case=case, actor=actor, event_type=event_type,
                payload={"notice_id": locked.pk, "message_id": dispatch.message_id, "error": error},
                audit_action=action, target_type="notice", target_id=locked.pk,
                decision="failed" if error else "sent")
    notice.refresh_from_db()
    return locked
