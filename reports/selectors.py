"""The dashboard's reads, scoped to the user's tenant. Workload and due dates are read live from the
cases (an aggregate over the open ones, on the (tenant, status) index); service levels, time to
decision and agent quality from the facts the periodic refresh keeps (reports.services)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.db.models import Avg, Count, Exists, F, OuterRef, Q, Sum

from accounts.models import User
from cases.models import OPEN_STATUSES, Case, Notice, NoticeStatus, Proposal
from reports.filters import NONE_VALUE, DashboardFilters, week_end
from reports.models import AgentTally, CaseFact, DashboardRefresh
from reports.outcomes import (
    DISPUTE_OUTCOMES,
    NOTICE_OUTCOMES,
    PROPOSAL_OUTCOMES,
    dispute_outcome,
    notice_outcome,
)
from runs.models import Artifact

DEADLINE_TYPES = {"acknowledge": "Acknowledgement", "response": "Response", "close": "Final response"}
DUE_STATES = {"overdue": "Overdue", "this_week": "Due this week"}
SLA_MEASURES = {"acknowledge": "Acknowledged within the due date", "answer": "Answered within the due date"}
# Time from receipt to the standing decision, in days: (key, label, lowest, highest or None).
DECISION_BUCKETS = (("0-15", "Within 15 days", 0, 15), ("16-30", "16 to 30 days", 16, 30),
                    ("31-60", "31 to 60 days", 31, 60), ("61-", "More than 60 days", 61, None))
SLA_MONTHS_SHOWN = 12


def _tenant_id(user) -> int | None:
    return getattr(user, "tenant_id", None)


def _open_cases(user, filters: DashboardFilters):
    return Case.objects.filter(tenant_id=_tenant_id(user), status__in=sorted(OPEN_STATUSES)).filter(filters.on_cases())


def workload(*, user, filters: DashboardFilters, today: date) -> dict:
    """Open cases per analyst (assignee) and per team, each with how many are overdue."""
    counts = {"open": Count("pk"), "overdue": Count("pk", filter=Q(next_due__lt=today))}
    by_person = list(_open_cases(user, filters).order_by().values("assignee_id").annotate(**counts))
    names = dict(User.objects.filter(tenant_id=_tenant_id(user), pk__in=[r["assignee_id"] for r in by_person
                                                                        if r["assignee_id"]])
                 .values_list("pk", "username"))
    people = sorted(({"assignee_id": r["assignee_id"], "label": names.get(r["assignee_id"], "Unassigned"),
                      "open": r["open"], "overdue": r["overdue"]} for r in by_person),
                    key=lambda r: (r["assignee_id"] is None, -r["open"], r["label"]))
    teams = sorted(({"team": r["assigned_team"] or NONE_VALUE, "label": r["assigned_team"] or "No team",
                     "open": r["open"], "overdue": r["overdue"]}
                    for r in _open_cases(user, filters).order_by().values("assigned_team").annotate(**counts)),
                   key=lambda r: (r["team"] == NONE_VALUE, -r["open"], r["label"]))
    return {"people": people, "teams": teams}


def deadline_condition(*, deadline: str, due: str, today: date) -> Q:
    """An open case whose due date of this type is overdue, or due between today and Sunday. The
    acknowledgement and response are met once a notice is sent, the final response once the case
    is decided (cases.deadlines.met_deadlines)."""
    field = {"acknowledge": "acknowledge_due", "response": "response_due", "close": "close_due"}[deadline]
    when = Q(**{f"{field}__lt": today}) if due == "overdue" else Q(**{f"{field}__gte": today,
                                                                       f"{field}__lte": week_end(today)})
    condition = Q(status__in=sorted(OPEN_STATUSES)) & when
    if deadline != "close":
        condition &= ~Q(Exists(Notice.objects.filter(case=OuterRef("pk"), status=NoticeStatus.SENT)))
    return condition


def deadlines_due(*, user, filters: DashboardFilters, today: date) -> list[dict]:
    """Per deadline type: open cases overdue and due this week — one query."""
    counts = {f"{deadline}__{due}": Count("pk", filter=deadline_condition(deadline=deadline, due=due, today=today))
              for deadline in DEADLINE_TYPES for due in DUE_STATES}
    totals = _open_cases(user, filters).order_by().aggregate(**counts)
    return [{"deadline": deadline, "label": label,
             **{due: totals[f"{deadline}__{due}"] or 0 for due in DUE_STATES}}
            for deadline, label in DEADLINE_TYPES.items()]


def sla_condition(*, measure: str, met: bool, today: date) -> Q:
    """On CaseFact: the acknowledgement (first notice sent) or the answer (the decision) came by its
    due date (met), or came late, or has not come and the date has passed (missed). Cases still
    within their time count as neither."""
    done, due = ("acknowledged_on", "acknowledge_due") if measure == "acknowledge" else ("decided_on", "close_due")
    came = Q(**{f"{done}__isnull": False, f"{due}__isnull": False})
    if met:
        return came & Q(**{f"{done}__lte": F(due)})
    return (came & Q(**{f"{done}__gt": F(due)})) | Q(**{f"{done}__isnull": True, f"{due}__lt": today})


def decision_condition(bucket: str) -> Q:
    """On CaseFact: decided within the bucket's range of days (DECISION_BUCKETS)."""
    for key, _label, lowest, highest in DECISION_BUCKETS:
        if key == bucket:
            condition = Q(days_to_decision__gte=lowest)
            return condition & Q(days_to_decision__lte=highest) if highest is not None else condition
    raise ValueError(f"unknown bucket {bucket!r}")


def _facts(user, filters: DashboardFilters):
    return CaseFact.objects.filter(tenant_id=_tenant_id(user)).filter(filters.on_facts()).order_by()


def sla_by_month(*, user, filters: DashboardFilters, today: date) -> list[dict]:
    """Per month of receipt (the latest SLA_MONTHS_SHOWN with cases): cases received, and for the
    acknowledgement and the answer how many were met and missed, with the share met of those
    decided either way."""
    counts = {"received": Count("pk")}
    for measure in SLA_MEASURES:
        counts[f"{measure}_met"] = Count("pk", filter=sla_condition(measure=measure, met=True, today=today))
        counts[f"{measure}_missed"] = Count("pk", filter=sla_condition(measure=measure, met=False, today=today))
    rows = list(_facts(user, filters).values("month").annotate(**counts).order_by("-month")[:SLA_MONTHS_SHOWN])
    for row in reversed(rows):
        for measure in SLA_MEASURES:
            met, missed = row[f"{measure}_met"], row[f"{measure}_missed"]
            row[f"{measure}_rate"] = round(100 * met / (met + missed)) if met + missed else None
    return list(reversed(rows))


def decision_times(*, user, filters: DashboardFilters) -> dict:
    """Decided cases by days from receipt to decision (DECISION_BUCKETS), and the mean — one query."""
    counts = {key: Count("pk", filter=decision_condition(key)) for key, *_ in DECISION_BUCKETS}
    totals = _facts(user, filters).filter(days_to_decision__isnull=False).aggregate(
        decided=Count("pk"), mean=Avg("days_to_decision"), **counts)
    return {"decided": totals["decided"], "mean": round(totals["mean"], 1) if totals["mean"] is not None else None,
            "buckets": [{"key": key, "label": label, "count": totals[key]} for key, label, *_ in DECISION_BUCKETS]}


def agent_tallies(*, user, filters: DashboardFilters) -> list[dict]:
    """{agent, subject, kind, outcome, count} summed over the filtered months, products and teams."""
    return list(AgentTally.objects.filter(tenant_id=_tenant_id(user)).filter(filters.on_facts()).order_by()
                .values("agent", "subject", "kind", "outcome").annotate(count=Sum("count"))
                .order_by("subject", "agent", "kind", "outcome"))


def filter_choices(*, user) -> dict[str, list[str]]:
    """The teams and products the facts know (for the filter menus)."""
    facts = CaseFact.objects.filter(tenant_id=_tenant_id(user)).order_by()
    return {"teams": sorted(facts.values_list("team", flat=True).distinct()),
            "products": sorted(facts.values_list("product", flat=True).distinct())}


def last_refresh(*, user) -> DashboardRefresh | None:
    return DashboardRefresh.objects.filter(tenant_id=_tenant_id(user)).first()


@dataclass(frozen=True)
class QueueFilter:
    """The dashboard's conditions as the case queue takes them from its URL (each a number's link)."""

    filters: DashboardFilters
    open_only: bool = False
    deadline: str | None = None
    due: str | None = None
    sla: str | None = None
    decided_in: str | None = None

    def condition(self, *, tenant_id: int, today: date) -> Q:
        condition = self.filters.on_cases()
        if self.open_only:
            condition &= Q(status__in=sorted(OPEN_STATUSES))
        if self.deadline and self.due:
            condition &= deadline_condition(deadline=self.deadline, due=self.due, today=today)
        elif self.due == "overdue":  # any due date still open (the stored next_due, as the workload counts)
            condition &= Q(next_due__lt=today)
        elif self.due == "this_week":
            condition &= Q(next_due__gte=today, next_due__lte=week_end(today))
        facts = CaseFact.objects.filter(tenant_id=tenant_id)
        if self.sla:
            measure, _, outcome = self.sla.partition("_")
            facts = facts.filter(sla_condition(measure=measure, met=outcome == "met", today=today))
        if self.decided_in:
            facts = facts.filter(decision_condition(self.decided_in))
        if self.sla or self.decided_in:
            condition &= Q(pk__in=facts.values("case_id"))
        return condition


AGENT_OUTPUT_SUBJECTS = {"proposal": PROPOSAL_OUTCOMES, "notice": NOTICE_OUTCOMES, "dispute": DISPUTE_OUTCOMES}


def agent_outputs(*, user, subject: str, agent: str, outcome: str, kind: str | None,
                  filters: DashboardFilters):
    """The rows behind one agent-quality number, read live (newest first): an agent's proposals of a
    kind with a status, the notices it drafted, or the disputes it raised, that ended this way."""
    tenant_id = _tenant_id(user)
    on_facts = filters.on_facts(prefix="case__fact__")
    if subject == "proposal":
        rows = Proposal.objects.filter(tenant_id=tenant_id, proposer_id=agent, status=outcome)
        if kind:
            rows = rows.filter(kind=kind)
    elif subject == "notice":
        rows = (Notice.objects.filter(tenant_id=tenant_id, drafted_by=agent).annotate(outcome=notice_outcome())
                .filter(outcome=outcome))
    else:
        rows = (Artifact.objects.filter(tenant_id=tenant_id, kind="dispute", produced_by=agent)
                .annotate(outcome=dispute_outcome()).filter(outcome=outcome))
    return rows.filter(on_facts).select_related("case").order_by("-created_at", "-pk")
