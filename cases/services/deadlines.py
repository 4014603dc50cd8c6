"""Deadlines: the tenant's versioned DeadlinePolicy, and the only writes of a case's due dates
(computation in cases.deadlines).

Every change of a case's due dates is a `case.deadlines_changed` CaseEvent (versioned, replayed:
its payload carries the new values of every deadline field) plus an AuditEvent, with its cause:
`intake` is part of `case.created`; `policy` (a new policy version, recomputed), `pause` /
`resume` (waiting for evidence, when the policy says so), `extension` (a supervisor, with a
reason). Crossing into due soon / overdue is recorded once per crossing by the beat task."""

from __future__ import annotations

import logging
from datetime import date, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from accounts.models import Tenant
from audit.services import audit_record
from cases import policy
from cases.deadlines import (
    DEADLINE_FIELDS,
    DEADLINE_STATE_FIELDS,
    DEADLINES,
    DUE_SOON,
    OVERDUE,
    compute_due_dates,
    deadline_state,
    met_deadlines,
    validate_region,
)
from cases.models import (
    SETTLED_STATUSES,
    Case,
    CaseStatus,
    DayCount,
    DeadlineCrossing,
    DeadlinePolicy,
    NoticeStatus,
    is_settled,
)
from cases.services._common import (
    check_expected_version,
    lock_case,
    record_change,
    require_role,
    require_tenant,
)
from core.actors import Actor, coerce_actor
from core.errors import Conflict, Invalid, NotAllowed
from ops import metrics

logger = logging.getLogger(__name__)

CAN_MANAGE_DEADLINES = frozenset({policy.SUPERVISOR, policy.ADMIN})
CAN_EXTEND_DEADLINES = frozenset({policy.SUPERVISOR})
POLICY_FIELDS = ("country", "subdivision", "acknowledge_days", "acknowledge_day_count", "response_days",
                 "response_day_count", "close_days", "close_day_count", "due_soon_days",
                 "pause_while_waiting_for_evidence")
WATCHER = "deadline-watch"


# --- the stored next due date ---------------------------------------------------------------

def next_due_of(case: Case, *, notice_sent: bool) -> date | None:
    """The earliest due date still open: acknowledgement and response until a notice is sent,
    closure until the case is decided or closed; None when none is (cases.models.next_due_expression
    is the same rule in SQL)."""
    candidates = []
    if not notice_sent:
        candidates += [case.acknowledge_due, case.response_due]
    if not is_settled(case.status):
        candidates.append(case.close_due)
    return min((due for due in candidates if due is not None), default=None)


def recompute_next_due(case: Case, *, notice_sent: bool | None = None) -> date | None:
    """Bring the stored `Case.next_due` up to date, in the caller's transaction (the caller holds
    the case lock). The one writer of the field: every service that changes what it depends on —
    a due date (intake, policy, pause/resume, extension), the status (transitions), a notice sent
    (dispatch, settlement) — calls it after its change. `notice_sent` may be passed when the caller
    knows it (saves a query). Writes only when the value changes (one UPDATE of that column: no
    version bump, no event — it is derived, like a cache the case's own fields determine)."""
    if notice_sent is None:
        notice_sent = case.pk is not None and case.notices.filter(status=NoticeStatus.SENT).exists()
    value = next_due_of(case, notice_sent=notice_sent)
    if case.pk is None or case._state.adding:
        case.next_due = value  # the caller's save writes it
    elif value != case.next_due:
        Case.objects.filter(pk=case.pk).update(next_due=value)
        case.next_due = value
    return value


def deadline_values(case: Case) -> dict:
    """The case's deadline fields as JSON values (ISO dates), as events and the reducer hold them."""
    return {name: (value.isoformat() if isinstance(value, date) else value)
            for name in DEADLINE_STATE_FIELDS for value in [getattr(case, name)]}


# --- the policy ------------------------------------------------------------------------------------

def deadline_policy_current(*, tenant_id: int) -> DeadlinePolicy:
    """The tenant's newest policy version; version 1 with the CFPB defaults is created on first use
    (concurrent first uses create one row: the unique (tenant, version) decides)."""
    current = DeadlinePolicy.objects.filter(tenant_id=tenant_id).order_by("-version").first()
    if current is None:
        DeadlinePolicy.objects.bulk_create([DeadlinePolicy(tenant_id=tenant_id, version=1, created_by="system:defaults")],
                                           ignore_conflicts=True)
        current = DeadlinePolicy.objects.filter(tenant_id=tenant_id).order_by("-version").first()
    return current


def _validate_policy(values: dict) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    region = validate_region(values["country"], values["subdivision"])
    if region:
        errors["subdivision" if "subdivision" in region.lower() and values["subdivision"] else "country"] = [region]
    for key, _field, _label in DEADLINES:
        days = values[f"{key}_days"]
        if not isinstance(days, int) or isinstance(days, bool) or not 0 < days <= 365:
            errors[f"{key}_days"] = ["A whole number of days between 1 and 365."]
        if values[f"{key}_day_count"] not in DayCount.values:
            errors[f"{key}_day_count"] = ["calendar or business."]
    soon = values["due_soon_days"]
    if not isinstance(soon, int) or isinstance(soon, bool) or not 0 <= soon <= 60:
        errors["due_soon_days"] = ["A whole number of days between 0 and 60."]
    return errors


@transaction.atomic
def deadline_policy_create(*, actor, tenant: Tenant, recompute_open_cases: bool = True, **fields) -> DeadlinePolicy:
    """A new version of the tenant's deadline policy (supervisors and admins). Unnamed fields keep
    the current version's values. With `recompute_open_cases` (the default) every case not yet
    decided or closed gets its due dates recomputed under the new version (audited per case).
    Raises Forbidden, Invalid (field messages), Conflict (another version was created at the same
    time: reload and try again); nothing changes when it refuses."""
    actor = coerce_actor(actor)
    require_role(actor, CAN_MANAGE_DEADLINES, "change deadline policies")
    require_tenant(actor, tenant.pk)
    unknown = set(fields) - set(POLICY_FIELDS)
    if unknown:
        raise Invalid(f"Unknown deadline policy fields: {', '.join(sorted(unknown))}.")
    current = deadline_policy_current(tenant_id=tenant.pk)
    values = {name: getattr(current, name) for name in POLICY_FIELDS} | fields
    values["country"] = str(values["country"] or "").upper()
    values["subdivision"] = str(values["subdivision"] or "").upper()
    errors = _validate_policy(values)
    if errors:
        raise Invalid("The deadline policy was not saved.", fields=errors)
    version = (DeadlinePolicy.objects.filter(tenant=tenant).aggregate(v=Max("version"))["v"] or 0) + 1
    try:
        with transaction.atomic():
            new = DeadlinePolicy.objects.create(tenant=tenant, version=version, created_by=actor.identifier, **values)
    except IntegrityError:
        raise Conflict("Another deadline policy version was saved at the same time; reload and try again.") from None
    audit_record(tenant_id=tenant.pk, actor_type=actor.kind, actor_id=actor.identifier,
                 action="cases.deadline_policy.created", target_type="deadline_policy", target_id=new.pk,
                 policy_version=policy.POLICY_VERSION, payload={"version": version, **values})
    if recompute_open_cases:
        open_cases = Case.objects.filter(tenant=tenant).exclude(status__in=sorted(SETTLED_STATUSES))
        for case_id in open_cases.order_by("pk").values_list("pk", flat=True):
            _recompute(case=lock_case(case_id), actor=actor, deadline_policy=new)
    return new


# --- a case's due dates ------------------------------------------------------------------------------

def _start_date(case: Case) -> date:
    return case.received_at or timezone.localtime(case.created_at).date()


def intake_deadlines(case: Case) -> None:
    """Set the due dates of a case being opened (in memory: case_create saves it and records them
    in `case.created`)."""
    current = deadline_policy_current(tenant_id=case.tenant_id)
    start = case.received_at or timezone.localdate()
    for field, due in compute_due_dates(current, start).items():
        setattr(case, field, due)
    case.deadline_policy_version = current.version
    recompute_next_due(case, notice_sent=False)  # a new case: no notice yet


def _set_deadlines(*, case: Case, actor: Actor, cause: str, reason: str = "", changes: dict,
                   extra: dict | None = None) -> None:
    previous = deadline_values(case)
    for name, value in changes.items():
        setattr(case, name, value)
    new = deadline_values(case)
    if new == previous:
        return
    record_change(case=case, actor=actor, event_type="case.deadlines_changed",
            payload={"cause": cause, "reason": reason, **new, "previous": previous, **(extra or {})},
            audit_action="cases.case.deadlines_changed", decision="allowed")
    recompute_next_due(case)


def _recompute(*, case: Case, actor: Actor, deadline_policy: DeadlinePolicy) -> None:
    due = compute_due_dates(deadline_policy, _start_date(case))
    _set_deadlines(case=case, actor=actor, cause="policy", reason=f"deadline policy v{deadline_policy.version}",
                   changes={**due, "deadline_policy_version": deadline_policy.version})


@transaction.atomic
def case_deadlines_recompute(*, actor, case: Case, expected_version: int | None = None) -> Case:
    """Recompute a case's due dates under the tenant's current deadline policy (supervisors and
    admins). Refuses a decided or closed case (NotAllowed)."""
    actor = coerce_actor(actor)
    require_role(actor, CAN_MANAGE_DEADLINES, "recompute deadlines")
    require_tenant(actor, case.tenant_id)
    locked = lock_case(case)
    check_expected_version(locked, expected_version)
    if is_settled(locked.status):
        raise NotAllowed(f"{locked.reference} is {locked.status}; its deadlines are settled.")
    _recompute(case=locked, actor=actor, deadline_policy=deadline_policy_current(tenant_id=locked.tenant_id))
    case.refresh_from_db()
    return locked


@transaction.atomic
def case_deadline_extend(*, actor, case: Case, deadline: str, until: date, reason: str,
                         expected_version: int | None = None) -> Case:
    """A supervisor extends one due date (`acknowledge`, `response` or `close`) to a later date,
    with a reason. Refuses (nothing changes): other roles (Forbidden); no reason, an unknown
    deadline, a date not after the current one (Invalid); a decided or closed case (NotAllowed);
    a case changed since `expected_version` (Conflict)."""
    actor = coerce_actor(actor)
    require_role(actor, CAN_EXTEND_DEADLINES, "extend deadlines")
    require_tenant(actor, case.tenant_id)
    fields = {key: field for key, field, _label in DEADLINES}
    if deadline not in fields:
        raise Invalid(f"Unknown deadline {deadline!r}; one of: {', '.join(fields)}.",
                      fields={"deadline": ["Unknown deadline."]})
    if not (reason or "").strip():
        raise Invalid("An extension needs a reason.", fields={"reason": ["Say why the date moves."]})
    locked = lock_case(case)
    check_expected_version(locked, expected_version)
    if is_settled(locked.status):
        raise NotAllowed(f"{locked.reference} is {locked.status}; its deadlines are settled.")
    current = getattr(locked, fields[deadline])
    if not isinstance(until, date) or (current is not None and until <= current):
        raise Invalid(f"The new date must be after the current one ({current}).",
                      fields={"until": [f"Later than {current}."]})
    _set_deadlines(case=locked, actor=actor, cause="extension", reason=reason.strip(),
                   changes={fields[deadline]: until}, extra={"deadline": deadline})
    case.refresh_from_db()
    return locked


def deadlines_on_transition(*, case: Case, actor: Actor, source: str, target: str) -> None:
    """Pause the clock when the case starts waiting for evidence and resume it (moving every due
    date still running at the pause by the days paused) when it leaves, if the case's policy
    version says so. Called by the transition write path, inside its transaction."""
    if case.deadline_policy_version is None:
        return
    case_policy = DeadlinePolicy.objects.filter(tenant_id=case.tenant_id,
                                                version=case.deadline_policy_version).first()
    if case_policy is None or not case_policy.pause_while_waiting_for_evidence:
        return
    today = timezone.localdate()
    if target == CaseStatus.WAITING_FOR_EVIDENCE and case.deadline_paused_on is None:
        _set_deadlines(case=case, actor=actor, cause="pause", reason="waiting for evidence",
                       changes={"deadline_paused_on": today})
    elif source == CaseStatus.WAITING_FOR_EVIDENCE and case.deadline_paused_on is not None:
        paused_on = case.deadline_paused_on
        days = (today - paused_on).days
        changes: dict = {"deadline_paused_on": None}
        for field in DEADLINE_FIELDS:
            due = getattr(case, field)
            if due is not None and due >= paused_on:
                changes[field] = due + (today - paused_on)
        _set_deadlines(case=case, actor=actor, cause="resume", reason=f"paused {days} day(s) waiting for evidence",
                       changes=changes, extra={"paused_days": days})


# --- crossings (the beat task) -----------------------------------------------------------------------

def deadline_crossings_record(*, today: date | None = None) -> int:
    """Record a `deadline.due_soon` / `deadline.overdue` event (and its audit) for each due date
    that has crossed into that state and not been recorded yet. Safe to run twice or in parallel:
    the unique DeadlineCrossing (case, deadline, state, due) lets one insert win; a moved due date
    is a new crossing. Paused and settled clocks are skipped. Returns how many were recorded."""
    today = today or timezone.localdate()
    actor = Actor.system(WATCHER)
    recorded = 0
    horizon = Q()
    soon_max = 60  # due_soon_days is at most 60 (validated), so nothing beyond can be due soon
    for field in DEADLINE_FIELDS:
        horizon |= Q(**{f"{field}__lte": today + timedelta(days=soon_max)})
    candidates = (Case.objects.filter(horizon, deadline_paused_on__isnull=True)
                  .exclude(status=CaseStatus.CLOSED).order_by("pk").values_list("pk", flat=True))
    policies: dict[int, DeadlinePolicy] = {}
    for case_id in candidates.iterator():
        recorded += _record_case_crossings(case_id=case_id, today=today, actor=actor, policies=policies)
    return recorded


@transaction.atomic
def _record_case_crossings(*, case_id: int, today: date, actor: Actor, policies: dict) -> int:
    case = lock_case(case_id)
    if case.tenant_id not in policies:
        policies[case.tenant_id] = deadline_policy_current(tenant_id=case.tenant_id)
    soon_days = policies[case.tenant_id].due_soon_days
    met = met_deadlines(case)
    count = 0
    for key, field, label in DEADLINES:
        due = getattr(case, field)
        state = deadline_state(due, today=today, due_soon_days=soon_days, met=key in met)
        if state not in (DUE_SOON, OVERDUE):
            continue
        if DeadlineCrossing.objects.filter(case=case, deadline=key, state=state, due=due).exists():
            continue
        event = record_change(case=case, actor=actor, event_type=f"deadline.{state}",
                        payload={"deadline": key, "label": label, "due": due.isoformat(), "today": today.isoformat()},
                        audit_action=f"cases.deadline.{state}")
        try:
            with transaction.atomic():
                DeadlineCrossing.objects.create(tenant_id=case.tenant_id, case=case, deadline=key, state=state,
                                                due=due, event=event)
        except IntegrityError:
            # Unreachable while we hold the case lock; kept so a missing lock could never record twice.
            raise Conflict("This deadline crossing was already recorded.") from None
        transaction.on_commit(lambda rule=f"{key}.{state}": metrics.deadline_crossed(rule=rule))
        count += 1
    return count
