"""Governed memory (agents propose, a person confirms): reusable cross-run knowledge such as an analyst's preferences.

Agents (and people) only *propose*; a person confirms. A memory never holds a domain fact — a
case's status or risk level, or that a notice was sent/approved — because those live on the case
and would go stale in memory; such a proposal is refused. Only active, unexpired records enter a
model context (agents.context). Re-exported by runs.services."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Tenant, User
from audit.services import audit_record
from cases import policy
from cases.models import Case, CaseStatus, RiskLevel
from core.actors import Actor, coerce_actor
from core.errors import Forbidden, Invalid, NotAllowed, NotFound
from runs.models import MemoryRecord, MemoryStatus, MemoryType

MAX_CONTENT = 2000
CAN_PROPOSE_MEMORY = frozenset({policy.ANALYST, policy.SUPERVISOR})


def _words(value: str) -> str:
    return r"[\s_-]+".join(re.escape(part) for part in re.split(r"[\s_]+", value))


_STATUS_WORDS = "|".join(_words(s) for s in sorted(CaseStatus.values, key=len, reverse=True))
_RISK_WORDS = "|".join(_words(r) for r in RiskLevel.values)
_STATUS_CLAIM = re.compile(
    rf"\b(?:case|complaint|status|it)\b[^.;\n]{{0,40}}?\b(?:is|was|has been|set to|moved to|now|are)\b"
    rf"[^.;\n]{{0,20}}?\b(?P<value>{_STATUS_WORDS})\b", re.IGNORECASE)
_STATUS_FIELD = re.compile(rf"\bstatus\b\s*[:=]\s*(?P<value>{_STATUS_WORDS})\b", re.IGNORECASE)
_RISK_CLAIM = re.compile(
    rf"\brisk(?:\s+level)?\b[^.;\n]{{0,30}}?\b(?P<value>{_RISK_WORDS})\b"
    rf"|\b(?P<value2>{_RISK_WORDS})[\s-]+risk\b", re.IGNORECASE)
_NOTICE_CLAIM = re.compile(r"\bnotices?\b[^.;\n]{0,40}?\b(?P<value>sent|dispatched|approved|mailed)\b",
                           re.IGNORECASE)


def _normalise(value: str) -> str:
    return re.sub(r"[\s-]+", "_", value.strip().lower())


def domain_facts_claimed(content: str) -> dict[str, str]:
    """The domain facts a text asserts: {"status": ..., "risk_level": ..., "notice": ...}. Used to
    refuse such memories and by the drift check on memory that predates the refusal."""
    facts: dict[str, str] = {}
    for pattern in (_STATUS_CLAIM, _STATUS_FIELD):
        match = pattern.search(content or "")
        if match:
            facts["status"] = _normalise(match.group("value"))
            break
    match = _RISK_CLAIM.search(content or "")
    if match:
        facts["risk_level"] = _normalise(match.group("value") or match.group("value2"))
    match = _NOTICE_CLAIM.search(content or "")
    if match:
        facts["notice"] = match.group("value").lower()
    return facts


def _validate_subject(*, tenant: Tenant, subject: str) -> str:
    subject = (subject or "").strip()
    if subject == "tenant":
        return subject
    kind, _, value = subject.partition(":")
    if kind == "user" and value.isdigit() and User.objects.filter(pk=int(value), tenant=tenant).exists():
        return subject
    if kind == "case" and value and Case.objects.filter(tenant=tenant, reference=value).exists():
        return subject
    raise Invalid("The memory's subject is not valid.", fields={
        "subject": ["Use \"tenant\", \"user:<id>\" of a person of this tenant, or \"case:<reference>\"."]})


def _audit(*, memory: MemoryRecord, actor: Actor, action: str, decision: str = "", payload: dict | None = None):
    case_id = None
    if memory.subject.startswith("case:"):
        case_id = Case.objects.filter(tenant_id=memory.tenant_id, reference=memory.subject[5:]).values_list(
            "pk", flat=True).first()
    audit_record(tenant_id=memory.tenant_id, case_id=case_id, actor_type=actor.kind, actor_id=actor.identifier,
                 action=action, target_type="memory", target_id=memory.pk,
                 run_id=str(memory.run_id or ""), policy_version=policy.POLICY_VERSION, decision=decision,
                 payload={"subject": memory.subject, "status": memory.status} | (payload or {}))


@transaction.atomic
def memory_propose(*, actor, tenant: Tenant, subject: str, content: str, memory_type: str = MemoryType.PREFERENCE,
                   confidence: float = 0.5, source_refs: dict | None = None, expires_at: datetime | None = None,
                   run=None, idempotency_key: str | None = None) -> MemoryRecord:
    """Propose a memory (status `proposed`; it enters no context until a person confirms it).

    Agents and analysts/supervisors of the tenant may propose. Refuses (Invalid, nothing written)
    empty or oversized content, an unknown subject or type, a past expiry, and any content that
    claims a domain fact (a case status, a risk level, a notice sent or approved). With an
    idempotency key, a repeated call returns the first call's record."""
    actor = coerce_actor(actor)
    if actor.is_user:
        if actor.user.tenant_id != tenant.pk:
            raise NotFound("No such tenant.")
        if actor.role not in CAN_PROPOSE_MEMORY:
            raise Forbidden(f"Your role ({actor.role}) cannot propose memory; analysts and supervisors can.")
    elif not actor.is_agent:
        raise Forbidden("Only people and agents propose memory.")
    if idempotency_key:
        existing = MemoryRecord.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing
    content = (content or "").strip()
    errors: dict[str, list[str]] = {}
    if not content:
        errors["content"] = ["A memory needs content."]
    elif len(content) > MAX_CONTENT:
        errors["content"] = [f"At most {MAX_CONTENT} characters."]
    else:
        facts = domain_facts_claimed(content)
        if facts:
            claimed = ", ".join(f"{k} {v}" for k, v in sorted(facts.items()))
            errors["content"] = [
                f"A memory cannot hold a domain fact ({claimed}): the case itself is the source of truth for "
                f"its status, risk level and notices. Propose a change to the case instead."]
    if memory_type not in MemoryType.values:
        errors["type"] = [f"One of: {', '.join(MemoryType.values)}."]
    if not 0 <= float(confidence) <= 1:
        errors["confidence"] = ["Between 0 and 1."]
    expires_at = expires_at or memory_expiry_default()
    if expires_at <= timezone.now():
        errors["expires_at"] = ["The expiry must be in the future."]
    if errors:
        raise Invalid("The memory was not proposed.", fields=errors)
    subject = _validate_subject(tenant=tenant, subject=subject)
    memory = MemoryRecord(tenant=tenant, subject=subject, type=memory_type, content=content,
                          source_refs=dict(source_refs or {}), confidence=float(confidence), expires_at=expires_at,
                          proposed_by=actor.identifier, run=run, idempotency_key=idempotency_key)
    try:
        with transaction.atomic():
            memory.save()
    except IntegrityError:
        return MemoryRecord.objects.get(idempotency_key=idempotency_key)
    _audit(memory=memory, actor=actor, action="runs.memory.proposed", payload={"content": content})
    return memory


def _require_decider(actor: Actor, memory: MemoryRecord, verb: str):
    if not actor.is_user:
        raise Forbidden(f"Only a person can {verb} memory; agents may only propose it.")
    user = actor.user
    if user.tenant_id != memory.tenant_id:
        raise NotFound("No such memory.")
    own = memory.subject == f"user:{user.pk}"
    if not own and user.role != policy.SUPERVISOR:
        raise Forbidden(f"Only the person the memory is about, or a supervisor, can {verb} it.")
    return user


def _lock(memory: MemoryRecord) -> MemoryRecord:
    return MemoryRecord.objects.select_for_update().get(pk=memory.pk)


@transaction.atomic
def memory_confirm(*, actor, memory: MemoryRecord, note: str = "") -> MemoryRecord:
    """A person confirms a proposed memory: it becomes active until it expires. Refuses agents
    (Forbidden), other people than its subject or a supervisor (Forbidden), a record that is not
    proposed (NotAllowed) or already expired (NotAllowed)."""
    actor = coerce_actor(actor)
    user = _require_decider(actor, memory, "confirm")
    locked = _lock(memory)
    if locked.status != MemoryStatus.PROPOSED:
        raise NotAllowed(f"This memory is {locked.get_status_display().lower()}; only a proposed memory can be "
                         f"confirmed.")
    if locked.expires_at <= timezone.now():
        raise NotAllowed("This memory expired before it was confirmed; propose it again if it still holds.")
    locked.status = MemoryStatus.ACTIVE
    locked.decided_by = user
    locked.decided_at = timezone.now()
    locked.decision_note = note
    locked.save()
    _audit(memory=locked, actor=actor, action="runs.memory.confirmed", decision="approved")
    memory.refresh_from_db()
    return locked


@transaction.atomic
def memory_forget(*, actor, memory: MemoryRecord, reason: str = "") -> MemoryRecord:
    """A person rejects a proposed memory or forgets an active one; either way it never enters a
    context again. The row stays for the audit trail."""
    actor = coerce_actor(actor)
    user = _require_decider(actor, memory, "forget")
    locked = _lock(memory)
    if locked.status == MemoryStatus.PROPOSED:
        locked.status, action = MemoryStatus.REJECTED, "runs.memory.rejected"
    elif locked.status == MemoryStatus.ACTIVE:
        locked.status, action = MemoryStatus.FORGOTTEN, "runs.memory.forgotten"
    else:
        raise NotAllowed(f"This memory is already {locked.get_status_display().lower()}.")
    locked.decided_by = user
    locked.decided_at = timezone.now()
    locked.decision_note = reason
    locked.save()
    _audit(memory=locked, actor=actor, action=action, decision="rejected", payload={"reason": reason})
    memory.refresh_from_db()
    return locked


def memory_expiry_default():
    return timezone.now() + timedelta(days=settings.ARBITER_MEMORY_DEFAULT_TTL_DAYS)
