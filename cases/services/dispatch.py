"""Sending an approved notice, exactly once."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.core.mail.message import make_msgid
from django.db import DatabaseError, transaction
from django.utils import timezone

from audit.services import audit_record
from cases import email_delivery, policy
from cases.models import (
    Approval,
    ApprovalDecision,
    DispatchStatus,
    Notice,
    NoticeDispatch,
    NoticeStatus,
)
from cases.services._common import lock_case, record_change, require_person, require_role, require_tenant
from cases.services.deadlines import recompute_next_due
from cases.services.notices import lock_notice
from cases.task_queue import notice_dispatch_enqueue
from core.actors import Actor, coerce_actor
from core.errors import Conflict, Forbidden, Invalid, NotAllowed, PersonRequired
from outbox.models import OutboxMessage

logger = logging.getLogger(__name__)

# Who may settle a notice whose delivery is unknown (they read the mail log and decide).
CAN_SETTLE_NOTICES = frozenset({policy.SUPERVISOR, policy.ADMIN})
SETTLE_OUTCOMES = ("sent", "failed")
# Recording a send's outcome survives a database outage this long: the outcome is known only in
# this process's memory, and losing it would leave the notice `sending` for an operator.
RECORD_RETRY_DELAYS = (0.5, 1, 2, 4, 8, 8, 8)


def _valid_approvals(notice: Notice):
    return Approval.objects.filter(notice=notice, decision=ApprovalDecision.APPROVED, voided_at__isnull=True,
                                   content_hash=notice.content_hash)


def _valid_approval(notice: Notice) -> Approval | None:
    """The latest approval of the notice's current content given by a person. An approval given
    by an API key's service account (recorded before keys were refused, or written around the
    services) never authorises a send."""
    return (_valid_approvals(notice).filter(approver__is_service_account=False)
            .order_by("-created_at").first())


def _check_dispatchable(notice: Notice) -> Approval:
    """What must hold for a notice to be sent; returns the approval that authorises it."""
    if notice.status in (NoticeStatus.SENDING, NoticeStatus.SENT):
        raise Conflict(f"This notice is already {notice.get_status_display().lower()}; it is sent only once.")
    if notice.status == NoticeStatus.UNKNOWN:
        raise Conflict(f"Whether notice N{notice.pk}'s email went out is unknown; it is never re-sent blindly. "
                       f"Settle it first from the mail log (admin action, or manage.py notice_settle {notice.pk}).")
    if notice.status not in (NoticeStatus.APPROVED, NoticeStatus.FAILED):
        raise NotAllowed(f"Only an approved notice can be sent; this one is "
                         f"{notice.get_status_display().lower()}.")
    if notice.compute_content_hash() != notice.content_hash:
        raise NotAllowed("The notice's content does not match its recorded hash; it needs a new approval.")
    approval = _valid_approval(notice)
    if approval is None and _valid_approvals(notice).exists():
        raise PersonRequired("This notice was approved by an API key, not by a person, so it is never sent. "
                             "Edit it (which voids that approval) and submit it again for a supervisor "
                             "signed in to approve, or withdraw it.")
    if approval is None:
        raise NotAllowed("This notice has no valid approval of its current content; submit it for approval.")
    return approval


def _check_dispatcher(actor: Actor, notice: Notice) -> None:
    if actor.is_user:
        require_role(actor, policy.CAN_DISPATCH_NOTICES, "send notices")
        require_tenant(actor, notice.tenant_id)
    elif actor.is_agent:
        raise Forbidden("Agents cannot send notices; an approved notice is sent by a person or the system.")


@transaction.atomic
def notice_dispatch_request(*, actor, notice: Notice) -> Notice:
    """A person asks for an approved notice to be sent: the checks `notice_dispatch` will make are
    made now (so a refusal is immediate and queues nothing), the request is audited, and the
    dispatch task is written to the transactional outbox (published after the commit, or by the
    relay when the broker is down: the request succeeds either way). The worker's `notice_dispatch`
    stays the only judge and the only sender; a double click writes one outbox row (deduplicated
    per notice and dispatch attempt), and a duplicate task is a no-op."""
    actor = coerce_actor(actor)
    _check_dispatcher(actor, notice)
    case = lock_case(notice.case_id)
    locked = lock_notice(notice)
    approval = _check_dispatchable(locked)
    audit_record(
        tenant_id=case.tenant_id, case_id=case.pk, actor_type=actor.kind, actor_id=actor.identifier,
        action="cases.notice.dispatch_requested", target_type="notice", target_id=locked.pk,
        policy_version=policy.POLICY_VERSION, decision="allowed",
        payload={"notice_id": locked.pk, "approval_id": approval.pk, "content_hash": locked.content_hash})

    attempts = NoticeDispatch.objects.filter(notice=locked).values_list("attempts", flat=True).first() or 0
    notice_dispatch_enqueue(notice_id=locked.pk, actor_user_id=actor.user.pk if actor.is_user else None,
                            dedupe_key=f"notice-dispatch:{locked.pk}:{attempts}")
    return locked


def notice_dispatch(*, actor, notice: Notice) -> Notice:
    """Send an approved notice by email, exactly once.

    1. Claim (one transaction): lock the notice row; it must be approved (or failed, for a retry)
       with a valid approval of its current content hash; move it to `sending` and create its
       NoticeDispatch (unique per notice) with the Message-ID the email will carry. A concurrent
       dispatcher waits on the row lock, then finds it `sending`/`sent` and gets a Conflict.
    2. Send through Django's email backend, outside any transaction (no lock held over I/O).
    3. Record (one transaction, retried through a short database outage): `sent` with the message
       id; `failed` (retryable) when the message certainly did not go out; `unknown` when the
       message data went out and no final reply came back (cases.email_delivery.send_outcome) —
       an unknown notice is never retried automatically: `notice_settle` decides.

    A worker that dies between 1 and 3 leaves the notice `sending`: it is never re-sent blindly;
    past ARBITER_NOTICE_SENDING_STUCK_SECONDS the drift report shows it and an operator settles it
    (notice_settle) after reading the mail log for its Message-ID.
    Refuses agents (Forbidden), unapproved or edited-after-approval notices (NotAllowed), and a
    notice whose only approval was given by an API key (PersonRequired): only a person approves."""
    actor = coerce_actor(actor)
    _check_dispatcher(actor, notice)

    with transaction.atomic():
        case = lock_case(notice.case_id)
        locked = lock_notice(notice)
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
        record_change(case=case, actor=actor, event_type="notice.sending",
                payload={"notice_id": locked.pk, "message_id": dispatch.message_id, "attempt": dispatch.attempts},
                audit_action="cases.notice.dispatch_started", target_type="notice", target_id=locked.pk)

    error, outcome = "", email_delivery.SENT
    connection = None
    try:
        message = EmailMessage(subject=locked.subject, body=locked.body, from_email=settings.DEFAULT_FROM_EMAIL,
                               to=[locked.recipient],
                               headers={"Message-ID": dispatch.message_id, "X-Arbiter-Case": case.reference,
                                        "X-Arbiter-Notice": str(locked.pk)})
        # django-anymail sends this to the provider; its tracking webhooks bring it back (settling
        # an unknown notice). Other backends ignore the attribute.
        message.metadata = {"arbiter_notice_id": str(locked.pk), "arbiter_message_id": dispatch.message_id}
        connection = get_connection(fail_silently=False)
        connection.send_messages([message])
    except Exception as exc:  # classified: certainly not sent (retryable) or maybe sent (unknown)
        outcome = email_delivery.send_outcome(exc, connection)
        logger.warning("notice %s dispatch %s: %s", locked.pk, outcome, exc)
        error = f"{type(exc).__name__}: {exc}"

    locked = _record_outcome(notice=notice, actor=actor, outcome=outcome, error=error)
    notice.refresh_from_db()
    return locked


def _record_outcome(*, notice: Notice, actor: Actor, outcome: str, error: str) -> Notice:
    """Step 3 of notice_dispatch, retried through a database outage of up to ~30 s."""
    for delay in (*RECORD_RETRY_DELAYS, None):
        try:
            return _record_outcome_once(notice=notice, actor=actor, outcome=outcome, error=error)
        except DatabaseError:
            if delay is None:
                raise  # the notice stays `sending`: the drift report and notice_settle take over
            logger.warning("notice %s: recording the outcome (%s) failed; retrying in %ss", notice.pk, outcome,
                           delay, exc_info=True)
            from django.db import connection

            if not connection.in_atomic_block:  # a broken connection is replaced on the next query
                connection.close()
            time.sleep(delay)
    raise AssertionError("unreachable")


def _record_outcome_once(*, notice: Notice, actor: Actor, outcome: str, error: str) -> Notice:
    with transaction.atomic():
        case = lock_case(notice.case_id)
        locked = lock_notice(notice)
        dispatch = NoticeDispatch.objects.select_for_update().get(notice=locked)
        if locked.status != NoticeStatus.SENDING:
            # notice_settle decided while we were sending (an operator judged us dead): theirs stands.
            logger.warning("notice %s was settled (%s) while its send ended %s; the settlement stands",
                           locked.pk, locked.status, outcome)
            return locked
        if outcome == email_delivery.FAILED:
            locked.mark_failed()
            dispatch.status = DispatchStatus.FAILED
            dispatch.last_error = error
            event_type, action = "notice.failed", "cases.notice.dispatch_failed"
        elif outcome == email_delivery.UNKNOWN:
            locked.mark_unknown()
            dispatch.status = DispatchStatus.UNKNOWN
            dispatch.last_error = error
            event_type, action = "notice.unknown", "cases.notice.dispatch_unknown"
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
        if locked.status == NoticeStatus.SENT:  # the acknowledgement and response are met now
            recompute_next_due(case, notice_sent=True)
        record_change(case=case, actor=actor, event_type=event_type,
                payload={"notice_id": locked.pk, "message_id": dispatch.message_id, "error": error},
                audit_action=action, target_type="notice", target_id=locked.pk,
                decision={"sent": "sent", "failed": "failed"}.get(outcome, "unknown"))
    return locked


def notice_settle(*, actor, notice: Notice, outcome: str, reason: str, message_id: str = "",
                  stuck_check: bool = True) -> Notice:
    """Settle a notice whose delivery nobody recorded: `unknown` (the mail server may have it), or
    `sending` for longer than ARBITER_NOTICE_SENDING_STUCK_SECONDS (its worker died mid-send).

    outcome="sent": the operator found the message in the mail log; `message_id` (required) is the
    Message-ID they found — normally the dispatch's own, which notices carry in their header. The
    notice becomes `sent` (sent_at now, external_message_id recorded).
    outcome="failed": it certainly did not go out; the notice becomes `failed` (retryable: it can
    be sent again, or withdrawn).
    Either way a CaseEvent and an AuditEvent record who settled it, why (`reason`, required) and
    the previous status. Callers: the admin action, `manage.py notice_settle`, and the anymail
    tracking receiver (a system actor, `stuck_check=False`: a provider's word needs no waiting).

    Refuses, changing nothing: API keys whatever their role (PersonRequired), agents, and people
    who are not supervisors or admins of the
    notice's tenant (Forbidden / NotFound); an outcome other than sent/failed, an empty reason, a
    missing Message-ID for "sent" (Invalid); a notice that is not unknown or stuck sending — a send
    still in progress, or one already recorded (NotAllowed)."""
    actor = coerce_actor(actor)
    if actor.is_user:
        require_person(actor, "settle a notice's delivery")
        require_role(actor, CAN_SETTLE_NOTICES, "settle a notice's delivery")
        require_tenant(actor, notice.tenant_id)
    elif actor.is_agent:
        raise Forbidden("Agents cannot settle a notice's delivery; a person reads the mail log and decides.")
    fields = {}
    if outcome not in SETTLE_OUTCOMES:
        fields["outcome"] = ["Say whether it was sent or failed."]
    reason = (reason or "").strip()
    message_id = (message_id or "").strip()
    if not reason:
        fields["reason"] = ["Say why: what the mail log or provider showed."]
    if outcome == "sent" and not message_id:
        fields["message_id"] = ["Give the Message-ID found in the mail log."]
    if fields:
        raise Invalid("The settlement is incomplete.", fields=fields)

    with transaction.atomic():
        case = lock_case(notice.case_id)
        locked = lock_notice(notice)
        dispatch = NoticeDispatch.objects.select_for_update().filter(notice=locked).first()
        previous = locked.status
        if previous not in NoticeStatus.unsettled() or dispatch is None:
            raise NotAllowed(f"Notice N{locked.pk} is {locked.get_status_display().lower()}; only a notice whose "
                             f"delivery is unknown (or stuck sending) is settled.")
        if previous == NoticeStatus.SENDING and stuck_check:
            since = (timezone.now() - locked.updated_at).total_seconds()  # updated when it started sending
            if since < settings.ARBITER_NOTICE_SENDING_STUCK_SECONDS:
                raise NotAllowed(f"Notice N{locked.pk} started sending {int(since)}s ago and may still be in "
                                 f"progress; settle it after {settings.ARBITER_NOTICE_SENDING_STUCK_SECONDS}s "
                                 f"(ARBITER_NOTICE_SENDING_STUCK_SECONDS).")
        now = timezone.now()
        if outcome == "sent":
            locked.settle_sent()
            locked.sent_at = now
            locked.external_message_id = message_id
            dispatch.status = DispatchStatus.SENT
            dispatch.sent_at = now
        else:
            locked.settle_failed()
            dispatch.status = DispatchStatus.FAILED
            dispatch.last_error = f"Settled as failed by {actor.identifier}: {reason}"[:2000]
        locked.save()
        dispatch.save()
        if locked.status == NoticeStatus.SENT:
            recompute_next_due(case, notice_sent=True)
        record_change(case=case, actor=actor, event_type="notice.settled",
                payload={"notice_id": locked.pk, "outcome": outcome, "previous_status": previous, "reason": reason,
                         "message_id": message_id or dispatch.message_id,
                         "message_id_matches": (message_id or dispatch.message_id) == dispatch.message_id},
                audit_action="cases.notice.settled", target_type="notice", target_id=locked.pk,
                decision=outcome)
    notice.refresh_from_db()
    return locked


def notice_dispatch_redeliver_lost(*, older_than_seconds: int, now=None) -> list[int]:
    """Publish again the dispatch of approved notices whose task the broker lost.

    A dispatch's outbox row was relayed more than `older_than_seconds` ago, and the notice is still
    `approved` with no NoticeDispatch: the task never ran (a broker that lost its queue on restart, a
    message purged by hand). A new outbox row is written with the same arguments, deduplicated by the
    lost row's id, so each lost publication is replaced at most once. Safe to run any time: a task
    that was merely slow finds the notice claimed and is a no-op. Returns the notice ids requeued."""
    from datetime import timedelta


    horizon = (now or timezone.now()) - timedelta(seconds=older_than_seconds)
    waiting = set(Notice.objects.filter(status=NoticeStatus.APPROVED, dispatch__isnull=True)
                  .values_list("pk", flat=True))
    if not waiting:
        return []
    rows = (OutboxMessage.objects.filter(task="cases.tasks.notice_dispatch_task", kwargs__notice_id__in=list(waiting))
            .order_by("-id"))
    latest: dict[int, OutboxMessage] = {}
    for row in rows:
        latest.setdefault(int(row.kwargs["notice_id"]), row)
    requeued = []
    for notice_id, row in latest.items():
        if row.relayed_at is None or row.relayed_at >= horizon:
            continue  # still pending (the relay retries it) or published recently
        with transaction.atomic():
            notice_dispatch_enqueue(notice_id=notice_id, actor_user_id=row.kwargs.get("actor_user_id"),
                                    dedupe_key=f"notice-dispatch-redeliver:{row.pk}")
        logger.warning("notice %s: its dispatch task (outbox O%s) never ran; published again", notice_id, row.pk)
        requeued.append(notice_id)
    return requeued
