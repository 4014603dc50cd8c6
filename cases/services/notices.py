"""Notices: draft, edit, submit, approve, reject, withdraw."""

from __future__ import annotations

import logging

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_fsm import can_proceed

from accounts.models import User
from cases import policy
from cases.models import (
    Approval,
    ApprovalDecision,
    Case,
    CaseEvent,
    Notice,
    NoticeStatus,
)
from cases.notice_checker import check_notice
from cases.services._common import (
    check_same_case,
    lock_case,
    record_change,
    replayed_object,
    require_author,
    require_decider,
    require_role,
    require_tenant,
)
from core.actors import Actor, coerce_actor
from core.errors import Forbidden, Invalid, NotAllowed, Stale

logger = logging.getLogger(__name__)




# --- notices ------------------------------------------------------------------------------

def _validate_notice_content(*, recipient: str, subject: str, body: str) -> None:
    from django.core.validators import validate_email

    errors: dict[str, list[str]] = {}
    try:
        validate_email(recipient)
    except ValidationError:
        errors["recipient"] = [f"{recipient!r} is not a valid email address."]
    if not (subject or "").strip():
        errors["subject"] = ["A notice needs a subject."]
    elif len(subject) > 300:
        errors["subject"] = ["At most 300 characters."]
    elif any(ch in "\r\n\x85\u2028\u2029" or ord(ch) < 32 or ord(ch) == 127 for ch in subject.strip()):
        # A subject becomes an email header: a line break in it could never be sent.
        errors["subject"] = ["A subject must be one line: remove the line breaks and control characters."]
    if not (body or "").strip():
        errors["body"] = ["A notice needs a body."]
    if errors:
        raise Invalid("The notice is not valid.", fields=errors)


def lock_notice(notice: Notice) -> Notice:
    return Notice.objects.select_for_update().get(pk=notice.pk)


def _check(*, notice: Notice, case: Case) -> list[dict]:
    """Run the notice checker on the notice's current text and store the result with its hash."""
    notice.check_flags = check_notice(case=case, recipient=notice.recipient, subject=notice.subject,
                                      body=notice.body, consumer_request=notice.consumer_request)
    notice.checked_hash = notice.content_hash
    notice.checked_at = timezone.now()
    return notice.check_flags


def _flag_codes(flags: list[dict]) -> list[str]:
    return sorted({flag["code"] for flag in flags})


def _void_approvals(*, notice: Notice, reason: str) -> int:
    return Approval.objects.filter(notice=notice, voided_at__isnull=True).update(
        voided_at=timezone.now(), void_reason=reason)


@transaction.atomic
def notice_draft(*, actor, case: Case, subject: str, body: str, recipient: str = "", kind: str = "response",
                 run_id: str = "", idempotency_key: str | None = None, requested_by: User | None = None,
                 consumer_request: str = "") -> Notice:
    """Draft a notice to the complainant (agents and analysts/supervisors). Nothing is sent. The
    notice checker runs on the text (`consumer_request`: the request it must address, kept for
    later edits) and its flags are stored with the content hash and recorded in the event."""
    actor = coerce_actor(actor)
    require_author(actor, roles=policy.CAN_DRAFT_NOTICES, tenant_id=case.tenant_id, what="draft notices")
    existing = replayed_object(Notice, case=case, idempotency_key=idempotency_key)
    if existing is not None:
        return existing
    recipient = (recipient or case.complainant_email or "").strip()
    _validate_notice_content(recipient=recipient, subject=subject, body=body)
    locked = lock_case(case)
    if locked.status == "closed":
        raise NotAllowed(f"{locked.reference} is closed; no notice can be drafted.")
    notice = Notice(tenant_id=locked.tenant_id, case=locked, kind=kind, recipient=recipient,
                    subject=subject.strip(), body=body, drafted_by=actor.identifier,
                    last_edited_by=actor.identifier, run_id=run_id, idempotency_key=idempotency_key,
                    requested_by=f"user:{requested_by.pk}" if requested_by is not None else "",
                    consumer_request=(consumer_request or "").strip()[:4000])
    notice.content_hash = notice.compute_content_hash()
    _check(notice=notice, case=locked)
    try:
        with transaction.atomic():
            notice.save()
    except IntegrityError:
        existing = Notice.objects.get(tenant_id=locked.tenant_id, idempotency_key=idempotency_key)
        check_same_case(existing, locked, idempotency_key)
        return existing
    record_change(case=locked, actor=actor, event_type="notice.drafted",
            payload={"notice_id": notice.pk, "content_hash": notice.content_hash, "kind": kind,
                     "check_flags": _flag_codes(notice.check_flags)},
            audit_action="cases.notice.drafted", target_type="notice", target_id=notice.pk, run_id=run_id)
    return notice


@transaction.atomic
def notice_edit(*, actor, notice: Notice, subject: str | None = None, body: str | None = None,
                recipient: str | None = None) -> Notice:
    """Edit a notice's content. The notice returns to draft and every approval of it is voided:
    an approval covers the exact content (hash) the approver saw, nothing else. The notice
    checker runs again on the new text."""
    actor = coerce_actor(actor)
    require_role(actor, policy.CAN_DRAFT_NOTICES, "edit notices")
    require_tenant(actor, notice.tenant_id)
    case = lock_case(notice.case_id)
    locked = lock_notice(notice)
    new = {"recipient": locked.recipient if recipient is None else recipient.strip(),
           "subject": locked.subject if subject is None else subject.strip(),
           "body": locked.body if body is None else body}
    _validate_notice_content(**new)
    if not can_proceed(locked.edit):
        raise NotAllowed(f"A notice that is {locked.get_status_display().lower()} cannot be edited.")
    old_hash = locked.content_hash
    # The text this edit replaces, kept in the event (append-only): the review inbox diffs a revised
    # notice against the version a supervisor saw (cases.selectors.notice_earlier_versions_for).
    replaced = {"version": locked.version, "recipient": locked.recipient, "subject": locked.subject,
                "body": locked.body}
    locked.recipient, locked.subject, locked.body = new["recipient"], new["subject"], new["body"]
    locked.content_hash = locked.compute_content_hash()
    if locked.content_hash == old_hash:
        return locked  # nothing changed: keep status and approvals
    previous_status = locked.status
    locked.edit()
    locked.last_edited_by = actor.identifier
    locked.version += 1
    _check(notice=locked, case=case)
    locked.save()
    voided = _void_approvals(notice=locked, reason="content edited")
    record_change(case=case, actor=actor, event_type="notice.edited",
            payload={"notice_id": locked.pk, "old_hash": old_hash, "content_hash": locked.content_hash,
                     "previous_status": previous_status, "approvals_voided": voided,
                     "check_flags": _flag_codes(locked.check_flags), "replaced": replaced},
            audit_action="cases.notice.edited", target_type="notice", target_id=locked.pk)
    notice.refresh_from_db()
    return locked


@transaction.atomic
def notice_submit(*, actor, notice: Notice) -> Notice:
    """Submit a draft for approval (agents and analysts/supervisors). An agent's draft with a flag
    from the notice checker is refused (NotAllowed): it stays a flagged draft for a person, who may
    submit it and approve over the flags with a reason."""
    actor = coerce_actor(actor)
    if actor.is_user:
        require_role(actor, policy.CAN_DRAFT_NOTICES, "submit notices")
        require_tenant(actor, notice.tenant_id)
    elif not actor.is_agent:
        raise Forbidden("Only people and agents submit notices.")
    case = lock_case(notice.case_id)
    locked = lock_notice(notice)
    if not can_proceed(locked.submit):
        raise NotAllowed(f"Only a draft can be submitted; this notice is {locked.get_status_display().lower()}.")
    if actor.is_agent:
        flags = locked.check_flags if locked.is_checked else check_notice(
            case=case, recipient=locked.recipient, subject=locked.subject, body=locked.body,
            consumer_request=locked.consumer_request)
        if flags:
            raise NotAllowed(f"The notice checker flagged this draft ({', '.join(_flag_codes(flags))}); an agent's "
                             f"flagged draft is not submitted. It stays a draft for a person to revise.")
    locked.submit()
    locked.submitted_by = actor.identifier
    locked.save()
    record_change(case=case, actor=actor, event_type="notice.submitted",
            payload={"notice_id": locked.pk, "content_hash": locked.content_hash},
            audit_action="cases.notice.submitted", target_type="notice", target_id=locked.pk,
            run_id=locked.run_id)
    notice.refresh_from_db()
    return locked


def _check_notice_approver(*, actor: Actor, notice: Notice, verb: str) -> User:
    user = require_decider(actor, policy.CAN_APPROVE_NOTICES, f"{verb} notices")
    require_tenant(actor, notice.tenant_id)
    wrote_it = actor.identifier in {notice.drafted_by, notice.last_edited_by, notice.requested_by} or CaseEvent.objects.filter(
        case_id=notice.case_id, event_type__in=["notice.drafted", "notice.edited"], payload__notice_id=notice.pk,
        actor_id=actor.identifier).exists()
    if wrote_it:
        raise Forbidden(f"You drafted or edited this notice, so you cannot {verb} it: another supervisor "
                        f"must (four eyes).")
    return user


@transaction.atomic
def notice_approve(*, actor, notice: Notice, content_hash: str, note: str = "", override_reason: str = "") -> Notice:
    """A supervisor signed in (not its drafter or last editor; never an API key: PersonRequired)
    approves a notice pending approval. The
    approval is bound to `content_hash`, the content the approver saw: if the notice changed
    since, it is refused as Stale.

    The notice checker runs again (today's date decides what is past): with any flag — a date
    before today, an action no event records, … — approving needs `override_reason`, an explicit
    confirmation recorded on the approval (`flags_overridden`, `override_reason`) and in the audit;
    without it the approval is refused (Invalid, field `override_reason`) and nothing changes."""
    actor = coerce_actor(actor)
    user = _check_notice_approver(actor=actor, notice=notice, verb="approve")
    case = lock_case(notice.case_id)
    locked = lock_notice(notice)
    user = _check_notice_approver(actor=actor, notice=locked, verb="approve")
    if locked.status != NoticeStatus.PENDING_APPROVAL:
        raise NotAllowed(f"Only a notice pending approval can be approved; this one is "
                         f"{locked.get_status_display().lower()}.")
    if content_hash != locked.content_hash or locked.compute_content_hash() != locked.content_hash:
        raise Stale("The notice changed since you opened it; review the current text and approve again.")
    flags = _check(notice=locked, case=case)
    override_reason = (override_reason or "").strip()
    if flags and not override_reason:
        raise Invalid(f"The notice checker flagged this notice ({', '.join(_flag_codes(flags))}). Edit it, or "
                      f"approve anyway with a reason (recorded on the approval and in the audit).",
                      fields={"override_reason": [flag["message"] for flag in flags]})
    approval = Approval.objects.create(
        tenant_id=case.tenant_id, notice=locked, approver=user, decision=ApprovalDecision.APPROVED,
        content_hash=locked.content_hash, case_version=case.version, policy_version=policy.POLICY_VERSION,
        note=note, flags_overridden=flags if flags else [], override_reason=override_reason if flags else "")
    locked.approve()
    locked.save()
    overridden = {"flags_overridden": _flag_codes(flags), "override_reason": override_reason} if flags else {}
    record_change(case=case, actor=actor, event_type="notice.approved",
            payload={"notice_id": locked.pk, "approval_id": approval.pk, "content_hash": locked.content_hash,
                     **overridden},
            audit_action="cases.notice.approved", target_type="notice", target_id=locked.pk,
            run_id=locked.run_id, decision="approved")
    notice.refresh_from_db()
    return locked


@transaction.atomic
def notice_reject(*, actor, notice: Notice, note: str) -> Notice:
    """A supervisor signed in (not its drafter; never an API key: PersonRequired) rejects a notice
    pending approval, with a reason."""
    actor = coerce_actor(actor)
    user = _check_notice_approver(actor=actor, notice=notice, verb="reject")
    if not (note or "").strip():
        raise Invalid("Say why the notice is rejected.", fields={"note": ["A reason is required."]})
    case = lock_case(notice.case_id)
    locked = lock_notice(notice)
    if locked.status != NoticeStatus.PENDING_APPROVAL:
        raise NotAllowed(f"Only a notice pending approval can be rejected; this one is "
                         f"{locked.get_status_display().lower()}.")
    Approval.objects.create(tenant_id=case.tenant_id, notice=locked, approver=user,
                            decision=ApprovalDecision.REJECTED, content_hash=locked.content_hash,
                            case_version=case.version, policy_version=policy.POLICY_VERSION, note=note)
    locked.reject()
    locked.save()
    record_change(case=case, actor=actor, event_type="notice.rejected", payload={"notice_id": locked.pk, "note": note},
            audit_action="cases.notice.rejected", target_type="notice", target_id=locked.pk,
            run_id=locked.run_id, decision="rejected")
    notice.refresh_from_db()
    return locked


@transaction.atomic
def notice_withdraw(*, actor, notice: Notice) -> Notice:
    """Withdraw a notice that has not been sent; its approvals are voided."""
    actor = coerce_actor(actor)
    require_role(actor, policy.CAN_DRAFT_NOTICES, "withdraw notices")
    require_tenant(actor, notice.tenant_id)
    case = lock_case(notice.case_id)
    locked = lock_notice(notice)
    if not can_proceed(locked.withdraw):
        raise NotAllowed(f"A notice that is {locked.get_status_display().lower()} cannot be withdrawn.")
    locked.withdraw()
    locked.save()
    _void_approvals(notice=locked, reason="withdrawn")
    record_change(case=case, actor=actor, event_type="notice.withdrawn", payload={"notice_id": locked.pk},
            audit_action="cases.notice.withdrawn", target_type="notice", target_id=locked.pk)
    notice.refresh_from_db()
    return locked
