"""The only write path for domain state (DESIGN §2, §11).

Every function is keyword-only, takes an `actor` (an Actor, or a user for convenience), checks
policy and permission, locks what it changes in a fixed order (case, then proposal/notice), writes
a CaseEvent and an AuditEvent in the same transaction, and raises a core.errors.DomainError —
changing nothing — when it refuses."""

from __future__ import annotations

import hashlib
import logging
from datetime import date

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.mail import EmailMessage, get_connection
from django.core.mail.message import make_msgid
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_fsm import can_proceed, has_transition_perm

from accounts.models import Tenant, User
from audit.services import audit_record
from cases import policy
from cases.models import (
    CASE_TRANSITIONS,
    Approval,
    ApprovalDecision,
    Case,
    CaseEvent,
    CaseReferenceCounter,
    DispatchStatus,
    Evidence,
    EvidenceKind,
    Notice,
    NoticeDispatch,
    NoticeStatus,
    Proposal,
    ProposalKind,
    ProposalStatus,
    RiskLevel,
)
from cases.reducer import REPLAYED_FIELDS, VERSIONED_EVENTS
from core.actors import Actor, coerce_actor
from core.errors import Conflict, Forbidden, Invalid, NotAllowed, NotFound, Stale

logger = logging.getLogger(__name__)


# --- shared checks --------------------------------------------------------------------------

def _require_user(actor: Actor, what: str) -> User:
    if actor.is_agent:
        raise Forbidden(f"Agents cannot {what}; an authorised person must do it.")
    if not actor.is_user:
        raise Forbidden(f"Only a person can {what}.")
    return actor.user


def _require_role(actor: Actor, roles: frozenset[str], what: str) -> User:
    user = _require_user(actor, what)
    if user.role not in roles:
        allowed = ", ".join(sorted(roles))
        raise Forbidden(f"Your role ({user.role}) cannot {what}; this needs: {allowed}.")
    return user


def _require_tenant(actor: Actor, tenant_id: int) -> None:
    """A user acting on another tenant's object learns nothing about it: 404, not 403."""
    if actor.is_user and actor.user.tenant_id != tenant_id:
        raise NotFound("Not found in your organisation; check the reference or link you used.")


def _lock_case(case: Case | int) -> Case:
    case_id = case.pk if isinstance(case, Case) else case
    try:
        return Case.objects.select_for_update().get(pk=case_id)
    except Case.DoesNotExist:
        raise NotFound("No such case.") from None


def _check_expected_version(case: Case, expected_version: int | None) -> None:
    if expected_version is not None and case.version != expected_version:
        raise Conflict(
            f"{case.reference} changed while you were looking at it (you saw version {expected_version}, "
            f"it is now version {case.version}). Reload the case and try again.",
            current_version=case.version,
        )


def _record(*, case: Case, actor: Actor, event_type: str, payload: dict, audit_action: str,
            target_type: str = "case", target_id=None, run_id: str = "", decision: str = "",
            evidence_refs: list | None = None) -> CaseEvent:
    """Write the CaseEvent and the AuditEvent of one committed change (caller holds the case lock).
    A versioned event bumps case.version and saves the case; stale pending proposals follow."""
    if event_type in VERSIONED_EVENTS and event_type != "case.created":
        case.version += 1
        case.save()
    last = case.events.order_by("-sequence").values_list("sequence", flat=True).first() or 0
    event = CaseEvent.objects.create(
        tenant_id=case.tenant_id, case=case, sequence=last + 1, event_type=event_type, payload=payload,
        case_version=case.version, actor_type=actor.kind, actor_id=actor.identifier, run_id=run_id,
        policy_version=policy.POLICY_VERSION,
    )
    audit_record(
        tenant_id=case.tenant_id, case_id=case.pk, actor_type=actor.kind, actor_id=actor.identifier,
        action=audit_action, target_type=target_type, target_id=target_id if target_id is not None else case.pk,
        run_id=run_id, policy_version=policy.POLICY_VERSION, decision=decision,
        evidence_refs=evidence_refs, payload=payload | {"case_version": case.version},
    )
    if event_type in VERSIONED_EVENTS and event_type != "case.created":
        _stale_pending_proposals(case=case, actor=actor)
    return event


def _stale_pending_proposals(*, case: Case, actor: Actor) -> None:
    """A proposal made against an older version can no longer be approved (DESIGN §2)."""
    for proposal in case.proposals.select_for_update().filter(status=ProposalStatus.PENDING,
                                                              case_version__lt=case.version):
        proposal.mark_stale()
        proposal.save()
        audit_record(
            tenant_id=case.tenant_id, case_id=case.pk, actor_type=actor.kind, actor_id=actor.identifier,
            action="cases.proposal.staled", target_type="proposal", target_id=proposal.pk,
            policy_version=policy.POLICY_VERSION, decision="stale",
            payload={"proposal_case_version": proposal.case_version, "case_version": case.version},
        )


# --- cases ------------------------------------------------------------------------------

def _next_reference(*, tenant: Tenant, year: int) -> str:
    CaseReferenceCounter.objects.bulk_create([CaseReferenceCounter(tenant=tenant, year=year)],
                                             ignore_conflicts=True)
    counter = CaseReferenceCounter.objects.select_for_update().get(tenant=tenant, year=year)
    counter.value += 1
    counter.save(update_fields=["value"])
    return f"CASE-{year}-{counter.value:06d}"


CASE_INPUT_FIELDS = ("product", "sub_product", "issue", "sub_issue", "company", "consumer_state", "tags",
                     "complainant_name", "complainant_email", "source", "source_reference")


@transaction.atomic
def case_create(*, actor, tenant: Tenant, title: str, received_at: date | None = None,
                narrative: str = "", **fields) -> Case:
    """Open a case (status new, risk unassessed). A narrative becomes the first text evidence.
    Raises Forbidden for roles that cannot open cases, Invalid for bad input."""
    actor = coerce_actor(actor)
    _require_role(actor, policy.CAN_CREATE_CASES, "open cases")
    _require_tenant(actor, tenant.pk)
    unknown = set(fields) - set(CASE_INPUT_FIELDS)
    if unknown:
        raise Invalid(f"Unknown case fields: {', '.join(sorted(unknown))}.")
    errors = {}
    if not (title or "").strip():
        errors["title"] = ["A case needs a title."]
    elif len(title) > 300:
        errors["title"] = ["At most 300 characters."]
    if errors:
        raise Invalid("The case could not be opened.", fields=errors)
    year = (received_at or timezone.now().date()).year
    case = Case(tenant=tenant, title=title.strip(), received_at=received_at, **fields)
    case.reference = _next_reference(tenant=tenant, year=year)
    try:
        case.full_clean(exclude=["tenant", "status"])
    except ValidationError as exc:
        raise Invalid("The case could not be opened.", fields=exc.message_dict) from None
    case.save()
    payload = {f: getattr(case, f) for f in REPLAYED_FIELDS}
    _record(case=case, actor=actor, event_type="case.created", payload=payload,
            audit_action="cases.case.created")
    if narrative.strip():
        _evidence_create(case=case, actor=actor, title="Complaint narrative", text=narrative,
                         source=fields.get("source", ""))
    return case


def _validate_upload(upload) -> list[str]:
    errors = []
    if upload.size > settings.EVIDENCE_MAX_BYTES:
        errors.append(f"The file is {upload.size} bytes; the limit is {settings.EVIDENCE_MAX_BYTES} bytes.")
    content_type = (getattr(upload, "content_type", "") or "").split(";")[0].strip()
    if content_type not in settings.EVIDENCE_ALLOWED_CONTENT_TYPES:
        allowed = ", ".join(settings.EVIDENCE_ALLOWED_CONTENT_TYPES)
        errors.append(f"Files of type {content_type or 'unknown'} are not accepted; allowed: {allowed}.")
    return errors


def _evidence_create(*, case: Case, actor: Actor, title: str, text: str | None = None, upload=None,
                     source: str = "", run_id: str = "") -> Evidence:
    if upload is not None:
        content = b"".join(upload.chunks())
        digest = hashlib.sha256(content).hexdigest()
        content_type = upload.content_type.split(";")[0].strip()
        evidence = Evidence(tenant_id=case.tenant_id, case=case, kind=EvidenceKind.FILE, title=title,
                            filename=upload.name[:255], content_type=content_type, size=len(content),
                            sha256=digest, source=source, added_by=actor.identifier)
        evidence.file.save(upload.name, ContentFile(content), save=False)
    else:
        raw = text.encode("utf-8")
        evidence = Evidence(tenant_id=case.tenant_id, case=case, kind=EvidenceKind.TEXT, title=title, text=text,
                            content_type="text/plain", size=len(raw), sha256=hashlib.sha256(raw).hexdigest(),
                            source=source, added_by=actor.identifier)
    evidence.save()
    _record(case=case, actor=actor, event_type="evidence.added",
            payload={"evidence_id": evidence.pk, "sha256": evidence.sha256, "title": title,
                     "size": evidence.size, "content_type": evidence.content_type},
            audit_action="cases.evidence.added", target_type="evidence", target_id=evidence.pk,
            run_id=run_id, evidence_refs=[evidence.pk])
    return evidence


@transaction.atomic
def evidence_add(*, actor, case: Case, title: str, text: str | None = None, upload=None,
                 source: str = "") -> Evidence:
    """Attach immutable evidence (text or an uploaded file) to a case. Checks the size limit and
    the content-type allow-list; raises Invalid with field messages when either is exceeded."""
    actor = coerce_actor(actor)
    _require_role(actor, policy.CAN_ADD_EVIDENCE, "add evidence")
    _require_tenant(actor, case.tenant_id)
    errors: dict[str, list[str]] = {}
    if not (title or "").strip():
        errors["title"] = ["Give the evidence a title."]
    if (text is None) == (upload is None):
        errors["content"] = ["Provide either text or a file, not both and not neither."]
    elif text is not None:
        if not text.strip():
            errors["text"] = ["The text is empty."]
        elif len(text.encode("utf-8")) > settings.EVIDENCE_MAX_BYTES:
            errors["text"] = [f"The text is over the limit of {settings.EVIDENCE_MAX_BYTES} bytes."]
    else:
        upload_errors = _validate_upload(upload)
        if upload_errors:
            errors["file"] = upload_errors
    if errors:
        raise Invalid("The evidence was not added.", fields=errors)
    locked = _lock_case(case)
    if locked.status == "closed":
        raise NotAllowed(f"{locked.reference} is closed; reopen it before adding evidence.")
    evidence = _evidence_create(case=locked, actor=actor, title=title.strip(), text=text, upload=upload,
                                source=source)
    case.refresh_from_db()
    return evidence


def _apply_transition(*, case: Case, actor: Actor, user: User, transition: str, reason: str,
                      run_id: str = "", via_proposal: Proposal | None = None) -> None:
    """Check and apply one FSM transition on a locked case, and record it."""
    if transition not in CASE_TRANSITIONS:
        raise Invalid(f"Unknown transition {transition!r}.", fields={"transition": ["Unknown transition."]})
    method = getattr(case, transition)
    if not policy.role_may_transition(user.role, transition):
        roles = ", ".join(sorted(policy.TRANSITION_ROLES[transition]))
        raise Forbidden(f"Your role ({user.role}) cannot {transition.replace('_', ' ')} a case; "
                        f"this needs: {roles}.")
    if not can_proceed(method):
        raise NotAllowed(_why_not(case, transition))
    if not has_transition_perm(method, user):  # the FSM's own permission= check, kept as the last word
        raise Forbidden(f"You may not {transition.replace('_', ' ')} {case.reference}.")
    if transition in policy.TRANSITIONS_REQUIRING_REASON and not (reason or "").strip():
        raise Invalid(f"{transition.replace('_', ' ').capitalize()} needs a reason.",
                      fields={"reason": ["A reason is required for this transition."]})
    source = case.status
    method()
    payload = {"transition": transition, "source": source, "target": case.status, "reason": reason}
    if transition == "decide":
        case.resolution = reason
        payload["resolution"] = reason
    if via_proposal is not None:
        payload["proposal_id"] = via_proposal.pk
    _record(case=case, actor=actor, event_type="case.transitioned", payload=payload,
            audit_action="cases.case.transitioned", run_id=run_id, decision="allowed")


def _why_not(case: Case, transition: str) -> str:
    """A refusal message that says what to do, not just that it failed."""
    meta = getattr(case, transition)._django_fsm
    nice = transition.replace("_", " ")
    if not meta.has_transition(case.status):
        available = ", ".join(t.name for t in case.get_available_status_transitions()) or "none"
        return (f"{case.reference} is {case.get_status_display().lower()}; it cannot {nice} from there. "
                f"Possible now: {available}.")
    unmet = [getattr(c, "hint", c.__name__) for c in meta.get_transition(case.status).conditions if not c(case)]
    return f"Cannot {nice} {case.reference} yet: {'; '.join(unmet)}."


@transaction.atomic
def case_transition(*, actor, case: Case, transition: str, reason: str = "",
                    expected_version: int | None = None) -> Case:
    """A permitted user moves the case through its lifecycle directly.

    Checks: the actor is a person of this tenant whose role may perform `transition`, the FSM
    allows it from the current status with its conditions met, a reason where policy needs one, and
    (when given) that the case is still at `expected_version`. Raises Forbidden / NotAllowed /
    Invalid / Conflict and changes nothing when a check fails."""
    actor = coerce_actor(actor)
    user = _require_user(actor, "change a case's status")
    _require_tenant(actor, case.tenant_id)
    locked = _lock_case(case)
    _check_expected_version(locked, expected_version)
    _apply_transition(case=locked, actor=actor, user=user, transition=transition, reason=reason)
    case.refresh_from_db()
    return locked


def _check_same_case(existing, case: Case, idempotency_key: str) -> None:
    """An idempotency key names one action on one case; reusing it elsewhere is a caller bug."""
    if existing.case_id != case.pk:
        raise Conflict(f"The idempotency key {idempotency_key!r} was already used for another case.")


# --- proposals ----------------------------------------------------------------------------

def _validate_proposal(*, case: Case, kind: str, payload: dict, evidence_refs: list) -> dict:
    errors: dict[str, list[str]] = {}
    clean: dict = {}
    if kind == ProposalKind.STATUS_TRANSITION:
        name = payload.get("transition")
        if name not in CASE_TRANSITIONS:
            errors["payload"] = [f"Unknown transition {name!r}; one of: {', '.join(CASE_TRANSITIONS)}."]
        elif not getattr(case, name)._django_fsm.has_transition(case.status):
            errors["payload"] = [f"{case.reference} is {case.status}; {name} is not possible from there."]
        else:
            clean = {"transition": name}
            if payload.get("reason"):
                clean["reason"] = str(payload["reason"])
    elif kind == ProposalKind.RISK_LEVEL:
        level = payload.get("risk_level")
        if level not in RiskLevel.values or level == RiskLevel.UNASSESSED:
            errors["payload"] = [f"Unknown risk level {level!r}; one of: low, medium, high, critical."]
        elif level == case.risk_level:
            errors["payload"] = [f"The risk level is already {level}."]
        else:
            clean = {"risk_level": level}
    elif kind == ProposalKind.ASSIGNMENT:
        team = str(payload.get("team") or "").strip()
        assignee_id = payload.get("assignee_id")
        if assignee_id is not None and not User.objects.filter(pk=assignee_id, tenant_id=case.tenant_id,
                                                                is_active=True).exists():
            errors["payload"] = ["The assignee is not an active user of this tenant."]
        elif not team and assignee_id is None:
            errors["payload"] = ["An assignment needs a team or an assignee."]
        else:
            clean = {"team": team, "assignee_id": assignee_id}
    else:
        errors["kind"] = [f"Unknown proposal kind {kind!r}."]
    refs = [int(r) for r in evidence_refs if str(r).isdigit()]
    if len(refs) != len(list(evidence_refs)) or (
            refs and Evidence.objects.filter(case=case, pk__in=refs).count() != len(set(refs))):
        errors["evidence_refs"] = ["Every evidence reference must be evidence of this case."]
    if errors:
        raise Invalid("The proposal was not created.", fields=errors)
    return clean


@transaction.atomic
def proposal_create(*, actor, case: Case, kind: str, payload: dict, rationale: str,
                    evidence_refs: list | tuple = (), run_id: str = "",
                    idempotency_key: str | None = None, requested_by: User | None = None) -> Proposal:
    """Record a proposed change against the case's current version. Agents and analysts /
    supervisors may propose; nothing in the domain changes. With an idempotency key, a repeated
    call returns the proposal the first call created. `requested_by` names the person who asked an
    agent for this change; like the proposer, they cannot approve it."""
    actor = coerce_actor(actor)
    if actor.is_user:
        _require_role(actor, policy.CAN_PROPOSE, "make proposals")
        _require_tenant(actor, case.tenant_id)
    elif not actor.is_agent:
        raise Forbidden("Only people and agents make proposals.")
    if idempotency_key:
        existing = Proposal.objects.filter(tenant_id=case.tenant_id, idempotency_key=idempotency_key).first()
        if existing:
            _check_same_case(existing, case, idempotency_key)
            return existing
    if not (rationale or "").strip():
        raise Invalid("A proposal needs a rationale.", fields={"rationale": ["Explain why."]})
    locked = _lock_case(case)
    clean = _validate_proposal(case=locked, kind=kind, payload=payload or {}, evidence_refs=list(evidence_refs))
    proposal = Proposal(
        tenant_id=locked.tenant_id, case=locked, kind=kind, payload=clean, rationale=rationale.strip(),
        evidence_refs=[int(r) for r in evidence_refs], proposer_type=actor.kind, proposer_id=actor.identifier,
        proposed_by_user=actor.user if actor.is_user else None, run_id=run_id, idempotency_key=idempotency_key,
        requested_by=f"user:{requested_by.pk}" if requested_by is not None else "",
        case_version=locked.version, policy_version=policy.POLICY_VERSION,
    )
    try:
        with transaction.atomic():
            proposal.save()
    except IntegrityError:
        # A concurrent copy of this call won the idempotency key: return its proposal.
        existing = Proposal.objects.get(tenant_id=locked.tenant_id, idempotency_key=idempotency_key)
        _check_same_case(existing, locked, idempotency_key)
        return existing
    _record(case=locked, actor=actor, event_type="proposal.created",
            payload={"proposal_id": proposal.pk, "kind": kind, "payload": clean}, run_id=run_id,
            audit_action="cases.proposal.created", target_type="proposal", target_id=proposal.pk,
            evidence_refs=proposal.evidence_refs)
    return proposal


def _lock_proposal(proposal: Proposal) -> Proposal:
    return Proposal.objects.select_for_update().get(pk=proposal.pk)


def _check_proposal_decidable(*, proposal: Proposal, case: Case, actor: Actor, verb: str) -> None:
    if proposal.status == ProposalStatus.STALE or (proposal.status == ProposalStatus.PENDING
                                                   and proposal.case_version != case.version):
        raise Stale(
            f"This proposal was made against version {proposal.case_version} of {case.reference}, which "
            f"is now at version {case.version}; the case changed since. It can no longer be "
            f"{verb.removesuffix('e')}ed — ask for a fresh proposal.")
    if proposal.status != ProposalStatus.PENDING:
        raise NotAllowed(f"This proposal is already {proposal.get_status_display().lower()}.")
    if proposal.proposer_id == actor.identifier:
        raise Forbidden(f"You made this proposal, so you cannot {verb} it: another supervisor must (four eyes).")
    if proposal.requested_by and proposal.requested_by == actor.identifier:
        raise Forbidden(f"The assistant proposed this at your request, so you cannot {verb} it: another "
                        f"supervisor must (four eyes).")


@transaction.atomic
def proposal_approve(*, actor, proposal: Proposal, note: str = "") -> Proposal:
    """A supervisor approves a pending proposal and it is applied to the case in the same
    transaction, through the FSM and its permission/conditions.

    Refuses (changing nothing): agents and roles without approval rights (Forbidden), the proposer
    (Forbidden, four eyes), a proposal made against an older case version (Stale), one already
    decided (NotAllowed), and a change the case can no longer take (NotAllowed)."""
    actor = coerce_actor(actor)
    user = _require_role(actor, policy.CAN_APPROVE_PROPOSALS, "approve proposals")
    _require_tenant(actor, proposal.tenant_id)
    case = _lock_case(proposal.case_id)
    locked = _lock_proposal(proposal)
    _check_proposal_decidable(proposal=locked, case=case, actor=actor, verb="approve")
    approval = Approval.objects.create(
        tenant_id=case.tenant_id, proposal=locked, approver=user, decision=ApprovalDecision.APPROVED,
        case_version=case.version, policy_version=policy.POLICY_VERSION, note=note,
        content_hash=hashlib.sha256(repr(sorted(locked.payload.items())).encode()).hexdigest(),
    )
    locked.apply()
    locked.decided_by = user
    locked.decided_at = timezone.now()
    locked.decision_note = note
    locked.save()
    _record(case=case, actor=actor, event_type="proposal.approved",
            payload={"proposal_id": locked.pk, "approval_id": approval.pk, "note": note},
            audit_action="cases.proposal.approved", target_type="proposal", target_id=locked.pk,
            run_id=locked.run_id, decision="approved", evidence_refs=locked.evidence_refs)
    _apply_proposal(case=case, proposal=locked, actor=actor, user=user)
    proposal.refresh_from_db()
    return locked


def _apply_proposal(*, case: Case, proposal: Proposal, actor: Actor, user: User) -> None:
    if proposal.kind == ProposalKind.STATUS_TRANSITION:
        _apply_transition(case=case, actor=actor, user=user, transition=proposal.payload["transition"],
                          reason=proposal.payload.get("reason") or proposal.rationale, run_id=proposal.run_id,
                          via_proposal=proposal)
    elif proposal.kind == ProposalKind.RISK_LEVEL:
        previous = case.risk_level
        case.risk_level = proposal.payload["risk_level"]
        _record(case=case, actor=actor, event_type="case.risk_changed",
                payload={"from": previous, "to": case.risk_level, "proposal_id": proposal.pk},
                audit_action="cases.case.risk_changed", run_id=proposal.run_id, decision="allowed",
                evidence_refs=proposal.evidence_refs)
    elif proposal.kind == ProposalKind.ASSIGNMENT:
        case.assigned_team = proposal.payload.get("team", "")
        case.assignee_id = proposal.payload.get("assignee_id")
        _record(case=case, actor=actor, event_type="case.assigned",
                payload={"team": case.assigned_team, "assignee_id": case.assignee_id,
                         "proposal_id": proposal.pk},
                audit_action="cases.case.assigned", run_id=proposal.run_id, decision="allowed")


@transaction.atomic
def proposal_reject(*, actor, proposal: Proposal, note: str) -> Proposal:
    """A supervisor rejects a pending proposal with a reason. Same refusals as approval."""
    actor = coerce_actor(actor)
    user = _require_role(actor, policy.CAN_APPROVE_PROPOSALS, "reject proposals")
    _require_tenant(actor, proposal.tenant_id)
    if not (note or "").strip():
        raise Invalid("Say why the proposal is rejected.", fields={"note": ["A reason is required."]})
    case = _lock_case(proposal.case_id)
    locked = _lock_proposal(proposal)
    _check_proposal_decidable(proposal=locked, case=case, actor=actor, verb="reject")
    Approval.objects.create(tenant_id=case.tenant_id, proposal=locked, approver=user,
                            decision=ApprovalDecision.REJECTED, case_version=case.version,
                            policy_version=policy.POLICY_VERSION, note=note)
    locked.reject()
    locked.decided_by = user
    locked.decided_at = timezone.now()
    locked.decision_note = note
    locked.save()
    _record(case=case, actor=actor, event_type="proposal.rejected", payload={"proposal_id": locked.pk,
                                                                            "note": note},
            audit_action="cases.proposal.rejected", target_type="proposal", target_id=locked.pk,
            run_id=locked.run_id, decision="rejected")
    proposal.refresh_from_db()
    return locked


@transaction.atomic
def proposal_withdraw(*, actor, proposal: Proposal) -> Proposal:
    """The proposer (or a supervisor) withdraws a pending proposal."""
    actor = coerce_actor(actor)
    user = _require_user(actor, "withdraw proposals")
    _require_tenant(actor, proposal.tenant_id)
    case = _lock_case(proposal.case_id)
    locked = _lock_proposal(proposal)
    if locked.proposer_id != actor.identifier and user.role != policy.SUPERVISOR:
        raise Forbidden("Only the proposer or a supervisor can withdraw a proposal.")
    if locked.status != ProposalStatus.PENDING:
        raise NotAllowed(f"This proposal is already {locked.get_status_display().lower()}.")
    locked.withdraw()
    locked.decided_by = user
    locked.decided_at = timezone.now()
    locked.save()
    _record(case=case, actor=actor, event_type="proposal.withdrawn", payload={"proposal_id": locked.pk},
            audit_action="cases.proposal.withdrawn", target_type="proposal", target_id=locked.pk)
    proposal.refresh_from_db()
    return locked


# --- notices ------------------------------------------------------------------------------

def _validate_notice_content(*, recipient: str, subject: str, body: str) -> None:
    from django.core.exceptions import ValidationError
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
    if not (body or "").strip():
        errors["body"] = ["A notice needs a body."]
    if errors:
        raise Invalid("The notice is not valid.", fields=errors)


def _lock_notice(notice: Notice) -> Notice:
    return Notice.objects.select_for_update().get(pk=notice.pk)


def _void_approvals(*, notice: Notice, reason: str) -> int:
    return Approval.objects.filter(notice=notice, voided_at__isnull=True).update(
        voided_at=timezone.now(), void_reason=reason)


@transaction.atomic
def notice_draft(*, actor, case: Case, subject: str, body: str, recipient: str = "", kind: str = "response",
                 run_id: str = "", idempotency_key: str | None = None, requested_by: User | None = None) -> Notice:
    """Draft a notice to the complainant (agents and analysts/supervisors). Nothing is sent."""
    actor = coerce_actor(actor)
    if actor.is_user:
        _require_role(actor, policy.CAN_DRAFT_NOTICES, "draft notices")
        _require_tenant(actor, case.tenant_id)
    elif not actor.is_agent:
        raise Forbidden("Only people and agents draft notices.")
    if idempotency_key:
        existing = Notice.objects.filter(tenant_id=case.tenant_id, idempotency_key=idempotency_key).first()
        if existing:
            _check_same_case(existing, case, idempotency_key)
            return existing
    recipient = (recipient or case.complainant_email or "").strip()
    _validate_notice_content(recipient=recipient, subject=subject, body=body)
    locked = _lock_case(case)
    if locked.status == "closed":
        raise NotAllowed(f"{locked.reference} is closed; no notice can be drafted.")
    notice = Notice(tenant_id=locked.tenant_id, case=locked, kind=kind, recipient=recipient,
                    subject=subject.strip(), body=body, drafted_by=actor.identifier,
                    last_edited_by=actor.identifier, run_id=run_id, idempotency_key=idempotency_key,
                    requested_by=f"user:{requested_by.pk}" if requested_by is not None else "")
    notice.content_hash = notice.compute_content_hash()
    try:
        with transaction.atomic():
            notice.save()
    except IntegrityError:
        existing = Notice.objects.get(tenant_id=locked.tenant_id, idempotency_key=idempotency_key)
        _check_same_case(existing, locked, idempotency_key)
        return existing
    _record(case=locked, actor=actor, event_type="notice.drafted",
            payload={"notice_id": notice.pk, "content_hash": notice.content_hash, "kind": kind},
            audit_action="cases.notice.drafted", target_type="notice", target_id=notice.pk, run_id=run_id)
    return notice


@transaction.atomic
def notice_edit(*, actor, notice: Notice, subject: str | None = None, body: str | None = None,
                recipient: str | None = None) -> Notice:
    """Edit a notice's content. The notice returns to draft and every approval of it is voided:
    an approval covers the exact content (hash) the approver saw, nothing else."""
    actor = coerce_actor(actor)
    _require_role(actor, policy.CAN_DRAFT_NOTICES, "edit notices")
    _require_tenant(actor, notice.tenant_id)
    case = _lock_case(notice.case_id)
    locked = _lock_notice(notice)
    new = {"recipient": locked.recipient if recipient is None else recipient.strip(),
           "subject": locked.subject if subject is None else subject.strip(),
           "body": locked.body if body is None else body}
    _validate_notice_content(**new)
    if not can_proceed(locked.edit):
        raise NotAllowed(f"A notice that is {locked.get_status_display().lower()} cannot be edited.")
    old_hash = locked.content_hash
    locked.recipient, locked.subject, locked.body = new["recipient"], new["subject"], new["body"]
    locked.content_hash = locked.compute_content_hash()
    if locked.content_hash == old_hash:
        return locked  # nothing changed: keep status and approvals
    previous_status = locked.status
    locked.edit()
    locked.last_edited_by = actor.identifier
    locked.version += 1
    locked.save()
    voided = _void_approvals(notice=locked, reason="content edited")
    _record(case=case, actor=actor, event_type="notice.edited",
            payload={"notice_id": locked.pk, "old_hash": old_hash, "content_hash": locked.content_hash,
                     "previous_status": previous_status, "approvals_voided": voided},
            audit_action="cases.notice.edited", target_type="notice", target_id=locked.pk)
    notice.refresh_from_db()
    return locked


@transaction.atomic
def notice_submit(*, actor, notice: Notice) -> Notice:
    """Submit a draft for approval (agents and analysts/supervisors)."""
    actor = coerce_actor(actor)
    if actor.is_user:
        _require_role(actor, policy.CAN_DRAFT_NOTICES, "submit notices")
        _require_tenant(actor, notice.tenant_id)
    elif not actor.is_agent:
        raise Forbidden("Only people and agents submit notices.")
    case = _lock_case(notice.case_id)
    locked = _lock_notice(notice)
    if not can_proceed(locked.submit):
        raise NotAllowed(f"Only a draft can be submitted; this notice is {locked.get_status_display().lower()}.")
    locked.submit()
    locked.submitted_by = actor.identifier
    locked.save()
    _record(case=case, actor=actor, event_type="notice.submitted",
            payload={"notice_id": locked.pk, "content_hash": locked.content_hash},
            audit_action="cases.notice.submitted", target_type="notice", target_id=locked.pk,
            run_id=locked.run_id)
    notice.refresh_from_db()
    return locked


def _check_notice_approver(*, actor: Actor, notice: Notice, verb: str) -> User:
    user = _require_role(actor, policy.CAN_APPROVE_NOTICES, f"{verb} notices")
    _require_tenant(actor, notice.tenant_id)
    wrote_it = actor.identifier in {notice.drafted_by, notice.last_edited_by, notice.requested_by} or CaseEvent.objects.filter(
        case_id=notice.case_id, event_type__in=["notice.drafted", "notice.edited"], payload__notice_id=notice.pk,
        actor_id=actor.identifier).exists()
    if wrote_it:
        raise Forbidden(f"You drafted or edited this notice, so you cannot {verb} it: another supervisor "
                        f"must (four eyes).")
    return user


@transaction.atomic
def notice_approve(*, actor, notice: Notice, content_hash: str, note: str = "") -> Notice:
    """A supervisor (not its drafter or last editor) approves a notice pending approval. The
    approval is bound to `content_hash`, the content the approver saw: if the notice changed
    since, it is refused as Stale."""
    actor = coerce_actor(actor)
    user = _check_notice_approver(actor=actor, notice=notice, verb="approve")
    case = _lock_case(notice.case_id)
    locked = _lock_notice(notice)
    user = _check_notice_approver(actor=actor, notice=locked, verb="approve")
    if locked.status != NoticeStatus.PENDING_APPROVAL:
        raise NotAllowed(f"Only a notice pending approval can be approved; this one is "
                         f"{locked.get_status_display().lower()}.")
    if content_hash != locked.content_hash or locked.compute_content_hash() != locked.content_hash:
        raise Stale("The notice changed since you opened it; review the current text and approve again.")
    approval = Approval.objects.create(
        tenant_id=case.tenant_id, notice=locked, approver=user, decision=ApprovalDecision.APPROVED,
        content_hash=locked.content_hash, case_version=case.version, policy_version=policy.POLICY_VERSION,
        note=note)
    locked.approve()
    locked.save()
    _record(case=case, actor=actor, event_type="notice.approved",
            payload={"notice_id": locked.pk, "approval_id": approval.pk, "content_hash": locked.content_hash},
            audit_action="cases.notice.approved", target_type="notice", target_id=locked.pk,
            run_id=locked.run_id, decision="approved")
    notice.refresh_from_db()
    return locked


@transaction.atomic
def notice_reject(*, actor, notice: Notice, note: str) -> Notice:
    """A supervisor (not its drafter) rejects a notice pending approval, with a reason."""
    actor = coerce_actor(actor)
    user = _check_notice_approver(actor=actor, notice=notice, verb="reject")
    if not (note or "").strip():
        raise Invalid("Say why the notice is rejected.", fields={"note": ["A reason is required."]})
    case = _lock_case(notice.case_id)
    locked = _lock_notice(notice)
    if locked.status != NoticeStatus.PENDING_APPROVAL:
        raise NotAllowed(f"Only a notice pending approval can be rejected; this one is "
                         f"{locked.get_status_display().lower()}.")
    Approval.objects.create(tenant_id=case.tenant_id, notice=locked, approver=user,
                            decision=ApprovalDecision.REJECTED, content_hash=locked.content_hash,
                            case_version=case.version, policy_version=policy.POLICY_VERSION, note=note)
    locked.reject()
    locked.save()
    _record(case=case, actor=actor, event_type="notice.rejected", payload={"notice_id": locked.pk, "note": note},
            audit_action="cases.notice.rejected", target_type="notice", target_id=locked.pk,
            run_id=locked.run_id, decision="rejected")
    notice.refresh_from_db()
    return locked


@transaction.atomic
def notice_withdraw(*, actor, notice: Notice) -> Notice:
    """Withdraw a notice that has not been sent; its approvals are voided."""
    actor = coerce_actor(actor)
    _require_role(actor, policy.CAN_DRAFT_NOTICES, "withdraw notices")
    _require_tenant(actor, notice.tenant_id)
    case = _lock_case(notice.case_id)
    locked = _lock_notice(notice)
    if not can_proceed(locked.withdraw):
        raise NotAllowed(f"A notice that is {locked.get_status_display().lower()} cannot be withdrawn.")
    locked.withdraw()
    locked.save()
    _void_approvals(notice=locked, reason="withdrawn")
    _record(case=case, actor=actor, event_type="notice.withdrawn", payload={"notice_id": locked.pk},
            audit_action="cases.notice.withdrawn", target_type="notice", target_id=locked.pk)
    notice.refresh_from_db()
    return locked


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
