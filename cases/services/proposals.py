"""Proposals: an agent or a person asks for a change; an authorised person decides."""

from __future__ import annotations

import hashlib
import logging

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import User
from cases import policy
from cases.models import (
    CASE_TRANSITIONS,
    PRECONDITION_EVENTS,
    PROPOSAL_PRECONDITION_FIELDS,
    SETTLED_STATUSES,
    Approval,
    ApprovalDecision,
    Case,
    CaseEvent,
    Evidence,
    Proposal,
    ProposalKind,
    ProposalStatus,
    RiskLevel,
)
from cases.services._common import (
    check_expected_version,
    check_same_case,
    lock_case,
    record_change,
    replayed_object,
    require_author,
    require_decider,
    require_tenant,
    require_user,
    stale_reason_for,
)
from cases.services.case import apply_transition
from core.actors import Actor, coerce_actor
from core.errors import Forbidden, Invalid, NotAllowed, Stale

# A decided or closed case takes no risk or assignment change (E): only reopening it.


def check_case_not_settled(case: Case, what: str) -> None:
    """Refuse a risk or assignment change on a decided or closed case (NotAllowed)."""
    if case.status in SETTLED_STATUSES:
        raise NotAllowed(f"{case.reference} is {case.get_status_display().lower()}: its {what} can no longer "
                         f"change. Reopen the case first (a supervisor, with a reason).")


def proposal_preconditions(*, case: Case, kind: str) -> dict:
    """The case fields a proposal of `kind` depends on, with their values now."""
    return {name: getattr(case, name) for name in PROPOSAL_PRECONDITION_FIELDS.get(kind, ())}

logger = logging.getLogger(__name__)




# --- proposals ----------------------------------------------------------------------------

def _validate_payload(*, case: Case, kind: str, payload: dict) -> tuple[dict, dict, dict]:
    """The payload's clean form, and its refusals: `errors` the request's shape (400), `conflicts`
    the case's state or what exists now (409: the same body may be right for another case or later)."""
    errors: dict[str, list[str]] = {}
    conflicts: dict[str, list[str]] = {}
    clean: dict = {}
    if kind == ProposalKind.STATUS_TRANSITION:
        name = payload.get("transition")
        if name not in CASE_TRANSITIONS:
            errors["payload"] = [f"Unknown transition {name!r}; one of: {', '.join(CASE_TRANSITIONS)}."]
        elif not getattr(case, name)._django_fsm.has_transition(case.status):
            conflicts["payload"] = [f"{case.reference} is {case.status}; {name} is not possible from there."]
        else:
            clean = {"transition": name}
            if payload.get("reason"):
                clean["reason"] = str(payload["reason"])
    elif kind == ProposalKind.RISK_LEVEL:
        level = payload.get("risk_level")
        if level not in RiskLevel.values or level == RiskLevel.UNASSESSED:
            errors["payload"] = [f"Unknown risk level {level!r}; one of: low, medium, high, critical."]
        elif level == case.risk_level:
            conflicts["payload"] = [f"The risk level is already {level}."]
        else:
            clean = {"risk_level": level}
    elif kind == ProposalKind.ASSIGNMENT:
        team = str(payload.get("team") or "").strip()
        assignee_id = payload.get("assignee_id")
        if not team and assignee_id is None:
            errors["payload"] = ["An assignment needs a team or an assignee."]
        elif assignee_id is not None and not User.objects.filter(pk=assignee_id, tenant_id=case.tenant_id,
                                                                  is_active=True).exists():
            conflicts["payload"] = ["The assignee is not an active user of this tenant."]
        else:
            clean = {"team": team, "assignee_id": assignee_id}
    else:
        errors["kind"] = [f"Unknown proposal kind {kind!r}."]
    return clean, errors, conflicts


def _validate_proposal(*, case: Case, kind: str, payload: dict, evidence_refs: list) -> dict:
    """Invalid (400) for a malformed request; NotAllowed (409) when only the case's state or what
    exists refuses it: a transition its status does not allow, the risk level it has, an assignee
    who is not an active person of the tenant, evidence that is not this case's."""
    clean, errors, conflicts = _validate_payload(case=case, kind=kind, payload=payload)
    refs = [int(r) for r in evidence_refs if str(r).isdigit()]
    if len(refs) != len(list(evidence_refs)):
        errors["evidence_refs"] = ["Every evidence reference must be evidence of this case."]
    elif refs and Evidence.objects.filter(case=case, pk__in=refs).count() != len(set(refs)):
        conflicts["evidence_refs"] = ["Every evidence reference must be evidence of this case."]
    if errors:
        raise Invalid("The proposal was not created.", fields=errors)
    if conflicts:
        raise NotAllowed("The proposal was not created: the case does not allow it now.", fields=conflicts)
    return clean


@transaction.atomic
def proposal_create(*, actor, case: Case, kind: str, payload: dict, rationale: str,
                    evidence_refs: list | tuple = (), run_id: str = "",
                    idempotency_key: str | None = None, requested_by: User | None = None) -> Proposal:
    """Record a proposed change with its preconditions (the case fields it depends on, with their
    values now: ADR 0006). Agents and analysts / supervisors may propose; nothing in the domain
    changes. A risk or assignment proposal on a decided or closed case is refused (NotAllowed). With an idempotency key, a repeated
    call returns the proposal the first call created. `requested_by` names the person who asked an
    agent for this change; like the proposer, they cannot approve it."""
    actor = coerce_actor(actor)
    require_author(actor, roles=policy.CAN_PROPOSE, tenant_id=case.tenant_id, what="make proposals")
    existing = replayed_object(Proposal, case=case, idempotency_key=idempotency_key)
    if existing is not None:
        return existing
    if not (rationale or "").strip():
        raise Invalid("A proposal needs a rationale.", fields={"rationale": ["Explain why."]})
    locked = lock_case(case)
    if kind in (ProposalKind.RISK_LEVEL, ProposalKind.ASSIGNMENT):
        check_case_not_settled(locked, "risk level" if kind == ProposalKind.RISK_LEVEL else "assignment")
    clean = _validate_proposal(case=locked, kind=kind, payload=payload or {}, evidence_refs=list(evidence_refs))
    proposal = Proposal(
        tenant_id=locked.tenant_id, case=locked, kind=kind, payload=clean, rationale=rationale.strip(),
        evidence_refs=[int(r) for r in evidence_refs], proposer_type=actor.kind, proposer_id=actor.identifier,
        proposed_by_user=actor.user if actor.is_user else None, run_id=run_id, idempotency_key=idempotency_key,
        requested_by=f"user:{requested_by.pk}" if requested_by is not None else "",
        case_version=locked.version, policy_version=policy.POLICY_VERSION,
        preconditions=proposal_preconditions(case=locked, kind=kind),
    )
    try:
        with transaction.atomic():
            proposal.save()
    except IntegrityError:
        # A concurrent copy of this call won the idempotency key: return its proposal.
        existing = Proposal.objects.get(tenant_id=locked.tenant_id, idempotency_key=idempotency_key)
        check_same_case(existing, locked, idempotency_key)
        return existing
    record_change(case=locked, actor=actor, event_type="proposal.created",
            payload={"proposal_id": proposal.pk, "kind": kind, "payload": clean}, run_id=run_id,
            audit_action="cases.proposal.created", target_type="proposal", target_id=proposal.pk,
            evidence_refs=proposal.evidence_refs)
    return proposal


def _lock_proposal(proposal: Proposal) -> Proposal:
    return Proposal.objects.select_for_update().get(pk=proposal.pk)


def _changing_event(case: Case, proposal: Proposal, field: str) -> CaseEvent | None:
    """The latest event that changed `field` since the proposal was made."""
    return (CaseEvent.objects.filter(case=case, event_type__in=PRECONDITION_EVENTS[field],
                                     case_version__gt=proposal.case_version)
            .order_by("-sequence").first())


def _stale_error(proposal: Proposal, verb: str) -> Stale:
    return Stale(f"This proposal is stale: {proposal.stale_message} It can no longer be "
                 f"{verb.removesuffix('e')}ed — ask the agents again or make a fresh proposal.",
                 **{"field": proposal.stale_reason.get("field"), "from": proposal.stale_reason.get("from"),
                    "to": proposal.stale_reason.get("to"), "event_id": proposal.stale_reason.get("event_id")})


def _check_proposal_decidable(*, proposal: Proposal, case: Case, actor: Actor, verb: str) -> None:
    if proposal.status == ProposalStatus.PENDING:
        # Belt and braces: the write path stales a proposal when one of its preconditions changes,
        # but the check here is what approval relies on. The proposal is not marked here: a
        # refusal changes nothing.
        changed = proposal.changed_preconditions(case)
        if changed:
            field, expected, now = changed[0]
            proposal.stale_reason = stale_reason_for(field=field, expected=expected, now=now,
                                                     event=_changing_event(case, proposal, field))
            raise _stale_error(proposal, verb)
    if proposal.status == ProposalStatus.STALE:
        raise _stale_error(proposal, verb)
    if proposal.status != ProposalStatus.PENDING:
        raise NotAllowed(f"This proposal is already {proposal.get_status_display().lower()}.")
    if proposal.proposer_id == actor.identifier:
        raise Forbidden(f"You made this proposal, so you cannot {verb} it: another supervisor must (four eyes).")
    if proposal.requested_by and proposal.requested_by == actor.identifier:
        raise Forbidden(f"The assistant proposed this at your request, so you cannot {verb} it: another "
                        f"supervisor must (four eyes).")


def _evidence_in_view(case: Case, evidence_seen) -> list[int]:
    """The evidence ids the approver had in view: the ids the page listed (checked to be this
    case's), or, without them (API, admin), the case's evidence now — the same set, since the
    approval is bound to the case version the approver saw."""
    on_case = list(Evidence.objects.filter(case=case).order_by("pk").values_list("pk", flat=True))
    if evidence_seen is None:
        return on_case
    seen = sorted({int(e) for e in evidence_seen if str(e).isdigit()})
    if len(seen) != len(set(map(str, evidence_seen))) or not set(seen) <= set(on_case):
        raise Invalid("The evidence in view must be evidence of this case.",
                      fields={"evidence_seen": ["Unknown evidence for this case."]})
    return seen


@transaction.atomic
def proposal_approve(*, actor, proposal: Proposal, note: str = "", expected_version: int | None = None,
                     evidence_seen: list[int] | None = None, confirm_reason: str = "") -> Proposal:
    """A supervisor approves a pending proposal and it is applied to the case in the same
    transaction, through the FSM and its permission/conditions.

    Only the proposal's own preconditions are re-checked (ADR 0006): a sibling applied to another
    field, or evidence added since, does not make it stale. `expected_version` is the case version
    the approver saw (the page's form carries it): a change while the page was open is a Conflict.
    `evidence_seen` (the evidence ids the page listed) is recorded on the approval.
    `confirm_reason`: deciding or closing a case on which no notice was ever sent needs it
    (Invalid without), recorded in the event and the audit.

    Refuses (changing nothing): API keys whatever their role (PersonRequired: only a person signed
    in decides), agents and roles without approval rights (Forbidden), the proposer
    (Forbidden, four eyes), a proposal whose precondition changed (Stale, naming the field, from →
    to and the event), a case changed since the approver's view (Conflict), one already decided
    (NotAllowed), a risk/assignment change on a decided or closed case and a change the case can
    no longer take (NotAllowed)."""
    actor = coerce_actor(actor)
    user = require_decider(actor, policy.CAN_APPROVE_PROPOSALS, "approve proposals")
    require_tenant(actor, proposal.tenant_id)
    case = lock_case(proposal.case_id)
    locked = _lock_proposal(proposal)
    _check_proposal_decidable(proposal=locked, case=case, actor=actor, verb="approve")
    check_expected_version(case, expected_version)
    if locked.kind in (ProposalKind.RISK_LEVEL, ProposalKind.ASSIGNMENT):
        check_case_not_settled(case, "risk level" if locked.kind == ProposalKind.RISK_LEVEL else "assignment")
    in_view = _evidence_in_view(case, evidence_seen)
    approval = Approval.objects.create(
        tenant_id=case.tenant_id, proposal=locked, approver=user, decision=ApprovalDecision.APPROVED,
        case_version=case.version, policy_version=policy.POLICY_VERSION, note=note, evidence_in_view=in_view,
        content_hash=hashlib.sha256(repr(sorted(locked.payload.items())).encode()).hexdigest(),
    )
    locked.apply()
    locked.decided_by = user
    locked.decided_at = timezone.now()
    locked.decision_note = note
    locked.save()
    record_change(case=case, actor=actor, event_type="proposal.approved",
            payload={"proposal_id": locked.pk, "approval_id": approval.pk, "note": note,
                     "evidence_in_view": in_view},
            audit_action="cases.proposal.approved", target_type="proposal", target_id=locked.pk,
            run_id=locked.run_id, decision="approved", evidence_refs=locked.evidence_refs)
    _apply_proposal(case=case, proposal=locked, actor=actor, user=user, confirm_reason=confirm_reason)
    proposal.refresh_from_db()
    return locked


def _apply_proposal(*, case: Case, proposal: Proposal, actor: Actor, user: User, confirm_reason: str = "") -> None:
    if proposal.kind == ProposalKind.STATUS_TRANSITION:
        apply_transition(case=case, actor=actor, user=user, transition=proposal.payload["transition"],
                          reason=proposal.payload.get("reason") or proposal.rationale, run_id=proposal.run_id,
                          via_proposal=proposal, confirm_reason=confirm_reason)
    elif proposal.kind == ProposalKind.RISK_LEVEL:
        previous = case.risk_level
        case.risk_level = proposal.payload["risk_level"]
        record_change(case=case, actor=actor, event_type="case.risk_changed",
                payload={"from": previous, "to": case.risk_level, "proposal_id": proposal.pk},
                audit_action="cases.case.risk_changed", run_id=proposal.run_id, decision="allowed",
                evidence_refs=proposal.evidence_refs)
    elif proposal.kind == ProposalKind.ASSIGNMENT:
        case.assigned_team = proposal.payload.get("team", "")
        case.assignee_id = proposal.payload.get("assignee_id")
        record_change(case=case, actor=actor, event_type="case.assigned",
                payload={"team": case.assigned_team, "assignee_id": case.assignee_id,
                         "proposal_id": proposal.pk},
                audit_action="cases.case.assigned", run_id=proposal.run_id, decision="allowed")


@transaction.atomic
def proposal_reject(*, actor, proposal: Proposal, note: str) -> Proposal:
    """A supervisor (a person, never an API key) rejects a pending proposal with a reason. Same
    refusals as approval."""
    actor = coerce_actor(actor)
    user = require_decider(actor, policy.CAN_APPROVE_PROPOSALS, "reject proposals")
    require_tenant(actor, proposal.tenant_id)
    if not (note or "").strip():
        raise Invalid("Say why the proposal is rejected.", fields={"note": ["A reason is required."]})
    case = lock_case(proposal.case_id)
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
    record_change(case=case, actor=actor, event_type="proposal.rejected", payload={"proposal_id": locked.pk,
                                                                            "note": note},
            audit_action="cases.proposal.rejected", target_type="proposal", target_id=locked.pk,
            run_id=locked.run_id, decision="rejected")
    proposal.refresh_from_db()
    return locked


@transaction.atomic
def proposal_withdraw(*, actor, proposal: Proposal) -> Proposal:
    """The proposer (or a supervisor) withdraws a pending proposal."""
    actor = coerce_actor(actor)
    user = require_user(actor, "withdraw proposals")
    require_tenant(actor, proposal.tenant_id)
    case = lock_case(proposal.case_id)
    locked = _lock_proposal(proposal)
    if locked.proposer_id != actor.identifier and user.role != policy.SUPERVISOR:
        raise Forbidden("Only the proposer or a supervisor can withdraw a proposal.")
    if locked.status != ProposalStatus.PENDING:
        raise NotAllowed(f"This proposal is already {locked.get_status_display().lower()}.")
    locked.withdraw()
    locked.decided_by = user
    locked.decided_at = timezone.now()
    locked.save()
    record_change(case=case, actor=actor, event_type="proposal.withdrawn", payload={"proposal_id": locked.pk},
            audit_action="cases.proposal.withdrawn", target_type="proposal", target_id=locked.pk)
    proposal.refresh_from_db()
    return locked
