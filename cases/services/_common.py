"""Shared checks of the write path: actors, roles, tenants, locks, the event + audit record."""

from __future__ import annotations

import logging

from django.db import transaction

from accounts.models import User
from audit.services import audit_record
from cases import policy
from cases.models import (
    PRECONDITION_EVENTS,
    Case,
    CaseEvent,
    ProposalStatus,
)
from cases.reducer import VERSIONED_EVENTS
from core.actors import Actor
from core.errors import Conflict, Forbidden, NotFound, PersonRequired
from ops import metrics

logger = logging.getLogger(__name__)




# --- shared checks --------------------------------------------------------------------------

def require_user(actor: Actor, what: str) -> User:
    if actor.is_agent:
        raise Forbidden(f"Agents cannot {what}; an authorised person must do it.")
    if not actor.is_user:
        raise Forbidden(f"Only a person can {what}.")
    return actor.user


# What a key may do instead, said in every person_required refusal.
WHAT_KEYS_MAY_DO = ("API keys may read, open cases, add evidence, propose, draft and submit notices, start "
                    "analyses, and request the sending of a notice a person approved.")


def is_service_account(actor: Actor) -> bool:
    """The actor is an API key's service account (a machine credential, not a person)."""
    return actor.is_user and bool(getattr(actor.user, "is_service_account", False))


def require_person(actor: Actor, what: str) -> User:
    """A decision needs a person signed in. Agents and the system are refused as before
    (Forbidden); an API key's service account is refused whatever its role (PersonRequired), so a
    leaked key, or two supervisor keys vouching for each other, can never decide."""
    user = require_user(actor, what)
    if is_service_account(actor):
        raise PersonRequired(f"Only a person signed in may {what}; an API key cannot, whatever its role. "
                             f"{WHAT_KEYS_MAY_DO}")
    return user


def require_decider(actor: Actor, roles: frozenset[str], what: str) -> User:
    """A person (not a key) whose role is one of `roles`."""
    require_person(actor, what)
    return require_role(actor, roles, what)


def require_role(actor: Actor, roles: frozenset[str], what: str) -> User:
    user = require_user(actor, what)
    if user.role not in roles:
        allowed = ", ".join(sorted(roles))
        raise Forbidden(f"Your role ({user.role}) cannot {what}; this needs: {allowed}.")
    return user


def require_tenant(actor: Actor, tenant_id: int) -> None:
    """A user acting on another tenant's object learns nothing about it: 404, not 403."""
    if actor.is_user and actor.user.tenant_id != tenant_id:
        raise NotFound("Not found in your organisation; check the reference or link you used.")


def lock_case(case: Case | int) -> Case:
    """The case row, locked for the change (it ranks before the audit head, ADR 0022). FOR NO KEY
    UPDATE: it still excludes every other writer of the case, but not the foreign-key checks of rows
    that merely reference it — a run step holding the case's audit head inserts such rows, and
    waiting for them while it waits for the head was a deadlock."""
    case_id = case.pk if isinstance(case, Case) else case
    try:
        return Case.objects.select_for_update(no_key=True).get(pk=case_id)
    except Case.DoesNotExist:
        raise NotFound("No such case.") from None


def check_expected_version(case: Case, expected_version: int | None) -> None:
    if expected_version is not None and case.version != expected_version:
        raise Conflict(
            f"{case.reference} changed while you were looking at it (you saw version {expected_version}, "
            f"it is now version {case.version}). Reload the case and try again.",
            current_version=case.version,
        )


def record_change(*, case: Case, actor: Actor, event_type: str, payload: dict, audit_action: str,
            target_type: str = "case", target_id=None, run_id: str = "", decision: str = "",
            evidence_refs: list | None = None) -> CaseEvent:
    """Write the CaseEvent and the AuditEvent of one committed change (caller holds the case lock).
    A versioned event bumps case.version and saves the case; a change to a field some pending
    proposal depends on makes that proposal stale."""
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
    if event_type in PRECONDITION_CHANGING_EVENTS:
        _stale_proposals_whose_preconditions_changed(case=case, actor=actor, event=event)
    if decision in ("approved", "rejected") and target_type in ("proposal", "notice"):
        transaction.on_commit(lambda: metrics.decision(kind=target_type, decision=decision))
    return event


# Only these events change a field some proposal may depend on (status, risk, assignment).
PRECONDITION_CHANGING_EVENTS = frozenset(
    event_type for event_types in PRECONDITION_EVENTS.values() for event_type in event_types)


def stale_reason_for(*, field: str, expected, now, event: CaseEvent | None) -> dict:
    """The stored reason a proposal is stale: which field, from what to what, and which event."""
    reason = {"field": field, "from": expected, "to": now}
    if event is not None:
        reason |= {"event_id": event.pk, "event_sequence": event.sequence, "event_type": event.event_type,
                   "actor_id": event.actor_id}
    return reason


def _stale_proposals_whose_preconditions_changed(*, case: Case, actor: Actor, event: CaseEvent) -> None:
    """A pending proposal goes stale only when one of its own preconditions no longer holds
    (ADR 0006): a sibling proposal applied to another field, or evidence added, leaves
    it pending. The caller holds the case lock; proposals are locked after it (fixed order)."""
    for proposal in case.proposals.select_for_update().filter(status=ProposalStatus.PENDING).order_by("pk"):
        changed = proposal.changed_preconditions(case)
        if not changed:
            continue
        field, expected, now = changed[0]
        proposal.stale_reason = stale_reason_for(field=field, expected=expected, now=now, event=event)
        proposal.mark_stale()
        proposal.save()
        audit_record(
            tenant_id=case.tenant_id, case_id=case.pk, actor_type=actor.kind, actor_id=actor.identifier,
            action="cases.proposal.staled", target_type="proposal", target_id=proposal.pk,
            policy_version=policy.POLICY_VERSION, decision="stale",
            payload={"proposal_case_version": proposal.case_version, "case_version": case.version,
                     **proposal.stale_reason},
        )


def check_same_case(existing, case: Case, idempotency_key: str) -> None:
    """An idempotency key names one action on one case; reusing it elsewhere is a caller bug."""
    if existing.case_id != case.pk:
        raise Conflict(f"The idempotency key {idempotency_key!r} was already used for another case.")


def require_author(actor: Actor, *, roles: frozenset[str], tenant_id: int, what: str) -> None:
    """People with one of `roles` (in the object's tenant) and agents may do `what`; nobody else."""
    if actor.is_user:
        require_role(actor, roles, what)
        require_tenant(actor, tenant_id)
    elif not actor.is_agent:
        raise Forbidden(f"Only people and agents {what}.")


def replayed_object(model, *, case: Case, idempotency_key: str | None):
    """The object an earlier call with this idempotency key created on this case, or None."""
    if not idempotency_key:
        return None
    existing = model.objects.filter(tenant_id=case.tenant_id, idempotency_key=idempotency_key).first()
    if existing is not None:
        check_same_case(existing, case, idempotency_key)
    return existing
