"""Cases, evidence and direct transitions."""

from __future__ import annotations

import hashlib
import logging
from datetime import date

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone
from django_fsm import can_proceed, has_transition_perm

from accounts.models import Tenant, User
from cases import policy
from cases.deadlines import notice_sent
from cases.extraction import evidence_extraction_create
from cases.models import (
    CASE_TRANSITIONS,
    SETTLED_STATUSES,
    Case,
    CaseReferenceCounter,
    Evidence,
    EvidenceKind,
    Proposal,
)
from cases.reducer import case_state
from cases.services._common import (
    check_expected_version,
    lock_case,
    record_change,
    require_person,
    require_role,
    require_tenant,
    require_user,
)
from cases.services.deadlines import deadlines_on_transition, intake_deadlines, recompute_next_due
from core.actors import Actor, coerce_actor
from core.errors import Forbidden, Invalid, NotAllowed

logger = logging.getLogger(__name__)




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
    """Open a case (status new, risk unassessed) with its due dates computed from `received_at`
    (or today) under the tenant's current DeadlinePolicy, recorded in `case.created`. A narrative
    becomes the first text evidence. Raises Forbidden for roles that cannot open cases, Invalid
    for bad input."""
    actor = coerce_actor(actor)
    require_role(actor, policy.CAN_CREATE_CASES, "open cases")
    require_tenant(actor, tenant.pk)
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
    intake_deadlines(case)  # due dates under the tenant's current deadline policy
    case.save()
    payload = case_state(case)
    record_change(case=case, actor=actor, event_type="case.created", payload=payload,
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
    evidence_extraction_create(evidence=evidence)  # a PDF: pending row now, text read by the worker after commit
    record_change(case=case, actor=actor, event_type="evidence.added",
            payload={"evidence_id": evidence.pk, "sha256": evidence.sha256, "title": title,
                     "size": evidence.size, "content_type": evidence.content_type},
            audit_action="cases.evidence.added", target_type="evidence", target_id=evidence.pk,
            run_id=run_id, evidence_refs=[evidence.pk])
    return evidence


@transaction.atomic
def evidence_add(*, actor, case: Case, title: str, text: str | None = None, upload=None,
                 source: str = "") -> Evidence:
    """Attach immutable evidence (text or an uploaded file) to a case. Checks the size limit and
    the content-type allow-list; raises Invalid with field messages when either is exceeded. The
    actor is a person or key whose role may add evidence, or the system (e-mail intake adding a
    complainant's reply)."""
    actor = coerce_actor(actor)
    if actor.kind != Actor.SYSTEM:
        require_role(actor, policy.CAN_ADD_EVIDENCE, "add evidence")
        require_tenant(actor, case.tenant_id)
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
    locked = lock_case(case)
    if locked.status == "closed":
        raise NotAllowed(f"{locked.reference} is closed; reopen it before adding evidence.")
    evidence = _evidence_create(case=locked, actor=actor, title=title.strip(), text=text, upload=upload,
                                source=source)
    case.refresh_from_db()
    return evidence


# Deciding or closing a case no notice was ever sent on needs an explicit confirmation.
TRANSITIONS_CONFIRMED_WITHOUT_NOTICE = frozenset({"decide", "close"})


def apply_transition(*, case: Case, actor: Actor, user: User, transition: str, reason: str,
                      run_id: str = "", via_proposal: Proposal | None = None, confirm_reason: str = "") -> None:
    """Check and apply one FSM transition on a locked case, and record it (with the deadline
    clock's pause or resume where the case's deadline policy says so)."""
    if transition not in CASE_TRANSITIONS:
        raise Invalid(f"Unknown transition {transition!r}.", fields={"transition": ["Unknown transition."]})
    method = getattr(case, transition)
    if transition in policy.PERSON_ONLY_TRANSITIONS:
        require_person(actor, f"{transition} a case")
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
    unconfirmed = transition in TRANSITIONS_CONFIRMED_WITHOUT_NOTICE and not notice_sent(case)
    if unconfirmed and not (confirm_reason or "").strip():
        raise Invalid(f"No notice was ever sent to the consumer on {case.reference}. To "
                      f"{transition.replace('_', ' ')} it anyway, confirm with a reason (it is recorded in the audit).",
                      fields={"confirm_reason": ["Confirm with a reason why no notice was sent."]})
    source = case.status
    method()
    payload = {"transition": transition, "source": source, "target": case.status, "reason": reason}
    if unconfirmed:
        payload["confirmed_without_notice"] = confirm_reason.strip()
    if transition == "decide":
        case.resolution = reason
        payload["resolution"] = reason
    if via_proposal is not None:
        payload["proposal_id"] = via_proposal.pk
    record_change(case=case, actor=actor, event_type="case.transitioned", payload=payload,
            audit_action="cases.case.transitioned", run_id=run_id, decision="allowed")
    deadlines_on_transition(case=case, actor=actor, source=source, target=case.status)
    if {source, case.status} & SETTLED_STATUSES:  # closure is met while decided or closed (the stored next_due)
        recompute_next_due(case)


def _why_not(case: Case, transition: str) -> str:
    """A refusal message that says what to do, not just that it failed."""
    meta = getattr(case, transition)._django_fsm
    nice = transition.replace("_", " ")
    if not meta.has_transition(case.status):
        available = ", ".join(t.name for t in case.get_available_status_transitions()) or "none"
        return (f"{case.reference} is {case.get_status_display().lower()}; it cannot {nice} from there. "
                f"Possible now: {available}.")
    # A condition may `explain` itself for this case (which notice holds a close up, and how to settle it).
    unmet = [c.explain(case) if hasattr(c, "explain") else getattr(c, "hint", c.__name__)
             for c in meta.get_transition(case.status).conditions if not c(case)]
    return f"Cannot {nice} {case.reference} yet: {'; '.join(unmet)}."


@transaction.atomic
def case_transition(*, actor, case: Case, transition: str, reason: str = "",
                    expected_version: int | None = None, confirm_reason: str = "") -> Case:
    """A permitted user moves the case through its lifecycle directly.

    Checks: the actor is a person of this tenant whose role may perform `transition` (deciding,
    closing and reopening are refused to API keys whatever their role: PersonRequired), the FSM
    allows it from the current status with its conditions met, a reason where policy needs one, and
    (when given) that the case is still at `expected_version`. Raises Forbidden / NotAllowed /
    Invalid / Conflict and changes nothing when a check fails. Deciding or closing a case on which
    no notice was ever sent needs `confirm_reason` (Invalid without it); the reason is recorded in
    the event and the audit as `confirmed_without_notice`."""
    actor = coerce_actor(actor)
    user = require_user(actor, "change a case's status")
    require_tenant(actor, case.tenant_id)
    locked = lock_case(case)
    check_expected_version(locked, expected_version)
    apply_transition(case=locked, actor=actor, user=user, transition=transition, reason=reason,
                      confirm_reason=confirm_reason)
    case.refresh_from_db()
    return locked


# --- taking an unassigned case -----------------------------------------------------------

CAN_TAKE_CASES = frozenset({policy.ANALYST, policy.SUPERVISOR})


@transaction.atomic
def case_take(*, actor, case: Case, expected_version: int | None = None) -> Case:
    """A person takes an unassigned case: they become its assignee at once (no proposal), and the
    change is recorded as a `case.assigned` event and audited like any assignment (the team stays).

    Refuses, changing nothing: agents and roles that do not work cases (Forbidden), another tenant's
    case (NotFound), a closed case or one that already has an assignee (NotAllowed: reassigning
    someone else's case stays a proposal a supervisor approves), and a case that changed since
    `expected_version` (Conflict)."""
    actor = coerce_actor(actor)
    user = require_role(actor, CAN_TAKE_CASES, "take cases")
    require_tenant(actor, case.tenant_id)
    locked = lock_case(case)
    if locked.assignee_id == user.pk:
        raise NotAllowed(f"{locked.reference} is already assigned to you.")
    if locked.assignee_id is not None:
        raise NotAllowed(f"{locked.reference} is already assigned to someone else. To move it, propose a "
                         f"reassignment on the case page; a supervisor approves it.")
    if locked.status == "closed":
        raise NotAllowed(f"{locked.reference} is closed; reopen it before taking it.")
    check_expected_version(locked, expected_version)
    locked.assignee_id = user.pk
    record_change(case=locked, actor=actor, event_type="case.assigned",
            payload={"team": locked.assigned_team, "assignee_id": user.pk, "taken": True},
            audit_action="cases.case.assigned", decision="allowed")
    case.refresh_from_db()
    return locked
