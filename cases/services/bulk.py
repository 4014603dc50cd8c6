"""Many cases opened at once (bulk intake): the same rows, events, audit records and due dates as
case_create writes one case at a time, in a handful of statements per batch."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date

from django.db import transaction
from django.utils import timezone

from accounts.models import Tenant
from audit.services import audit_record_many
from cases import policy
from cases.deadlines import compute_due_dates
from cases.models import Case, CaseEvent, CaseReferenceCounter, Evidence, EvidenceKind
from cases.reducer import case_state
from cases.services._common import require_tenant
from cases.services.case import CASE_INPUT_FIELDS
from cases.services.deadlines import deadline_policy_current, next_due_of
from core.actors import Actor, coerce_actor
from core.bulk import insert_rows, reserve_ids
from core.errors import Forbidden, Invalid

NARRATIVE_TITLE = "Complaint narrative"


@dataclass
class NewCase:
    """What one case is opened with (the arguments of case_create)."""

    title: str
    received_at: date
    narrative: str = ""
    fields: dict[str, str] = field(default_factory=dict)


@transaction.atomic
def case_create_many(*, actor, tenant: Tenant, new_cases: list[NewCase]) -> list[Case]:
    """Open every case of `new_cases`, in order, exactly as case_create would open each: status new,
    the next references of each year, due dates under the tenant's current DeadlinePolicy, the
    `case.created` event and its audit record, and a narrative as the first text evidence with its
    `evidence.added` event and audit record. Nothing is validated again here: the caller passes
    checked values (Invalid for an unknown field). The actor is a person who may open cases, or
    the system (an operator's command); Forbidden otherwise.

    Locks: the reference counter of each year in year order, then (creating them) the audit heads
    of the new cases' streams — the lock order of docs/architecture.md."""
    actor = coerce_actor(actor)
    _check_actor(actor, tenant)
    if not new_cases:
        return []
    for spec in new_cases:
        unknown = set(spec.fields) - set(CASE_INPUT_FIELDS)
        if unknown:
            raise Invalid(f"Unknown case fields: {', '.join(sorted(unknown))}.")
    references = _next_references(tenant=tenant, years=[spec.received_at.year for spec in new_cases])
    deadline_policy = deadline_policy_current(tenant_id=tenant.pk)
    due_dates: dict[date, dict] = {}
    cases = []
    for spec, reference in zip(new_cases, references, strict=True):
        if spec.received_at not in due_dates:
            due_dates[spec.received_at] = compute_due_dates(deadline_policy, spec.received_at)
        case = Case(tenant=tenant, reference=reference, title=spec.title, received_at=spec.received_at,
                    deadline_policy_version=deadline_policy.version, **due_dates[spec.received_at], **spec.fields)
        case.next_due = next_due_of(case, notice_sent=False)
        cases.append(case)
    created_payloads = [case_state(case) for case in cases]  # version 1: what case.created records
    for case, spec in zip(cases, new_cases, strict=True):
        if spec.narrative:
            case.version = 2  # evidence.added is a versioned event
    _record(actor=actor, cases=cases, new_cases=new_cases, created_payloads=created_payloads)
    return cases


def _check_actor(actor: Actor, tenant: Tenant) -> None:
    if actor.kind == Actor.SYSTEM:
        return
    if not actor.is_user or actor.role not in policy.CAN_CREATE_CASES:
        raise Forbidden("Only a person who may open cases, or an operator's command, can open cases in bulk.")
    require_tenant(actor, tenant.pk)


def _next_references(*, tenant: Tenant, years: list[int]) -> list[str]:
    """The next references for cases received in `years` (in order), each year's counter locked and
    advanced once by the number it gives out, years in ascending order."""
    wanted: dict[int, int] = {}
    for year in years:
        wanted[year] = wanted.get(year, 0) + 1
    CaseReferenceCounter.objects.bulk_create([CaseReferenceCounter(tenant=tenant, year=year) for year in sorted(wanted)],
                                             ignore_conflicts=True)
    counters = list(CaseReferenceCounter.objects.select_for_update().filter(tenant=tenant, year__in=wanted)
                    .order_by("year"))
    next_value = {}
    for counter in counters:
        next_value[counter.year] = counter.value + 1
        counter.value += wanted[counter.year]
    CaseReferenceCounter.objects.bulk_update(counters, ["value"])
    references = []
    for year in years:
        references.append(f"CASE-{year}-{next_value[year]:06d}")
        next_value[year] += 1
    return references


def _record(*, actor: Actor, cases: list[Case], new_cases: list[NewCase], created_payloads: list[dict]) -> None:
    """The cases, their evidence, case events and audit records, as case_create writes them.

    Where the case ids can be reserved (PostgreSQL), the evidence is inserted before its case: the
    foreign key is checked at the commit (Django's are deferred), and the search document's trigger
    then builds each case's words once, on the case's insert, instead of once more per narrative."""
    evidence_first = reserve_ids(cases)
    if not evidence_first:
        insert_rows(cases)
    evidence = [Evidence(tenant_id=case.tenant_id, case=case, kind=EvidenceKind.TEXT, title=NARRATIVE_TITLE,
                         text=spec.narrative, content_type="text/plain", size=len(spec.narrative.encode("utf-8")),
                         sha256=hashlib.sha256(spec.narrative.encode("utf-8")).hexdigest(),
                         source=spec.fields.get("source", ""), added_by=actor.identifier)
                for case, spec in zip(cases, new_cases, strict=True) if spec.narrative]
    insert_rows(evidence)
    if evidence_first:
        insert_rows(cases)
    evidence_of = {item.case_id: item for item in evidence}
    now = timezone.now()
    common = {"actor_type": actor.kind, "actor_id": actor.identifier, "policy_version": policy.POLICY_VERSION}
    events, audits = [], []
    for case, payload in zip(cases, created_payloads, strict=True):
        events.append(CaseEvent(tenant_id=case.tenant_id, case=case, sequence=1, event_type="case.created",
                                payload=payload, case_version=1, created_at=now, **common))
        audits.append({"tenant_id": case.tenant_id, "case_id": case.pk, "action": "cases.case.created",
                       "target_type": "case", "target_id": case.pk, "payload": payload | {"case_version": 1},
                       **common})
        item = evidence_of.get(case.pk)
        if item is None:
            continue
        added = {"evidence_id": item.pk, "sha256": item.sha256, "title": item.title, "size": item.size,
                 "content_type": item.content_type}
        events.append(CaseEvent(tenant_id=case.tenant_id, case=case, sequence=2, event_type="evidence.added",
                                payload=added, case_version=2, created_at=now, **common))
        audits.append({"tenant_id": case.tenant_id, "case_id": case.pk, "action": "cases.evidence.added",
                       "target_type": "evidence", "target_id": item.pk, "evidence_refs": [item.pk],
                       "payload": added | {"case_version": 2}, **common})
    insert_rows(events)
    audit_record_many(audits)
