"""The dashboard's reads, scoped to the user's tenant. Workload and due dates are read live from the
cases (aggregates over the open ones, served on PostgreSQL by the partial covering index of
reports/migrations/0003); service levels, time to decision and agent quality from the facts the
periodic refresh keeps (reports.services)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.db.models import Count, Exists, OuterRef, Q, Sum

from cases.models import OPEN_STATUSES, Case, Notice, NoticeStatus, Proposal
from reports.filters import (
    DECISION_BUCKETS,
    NONE_VALUE,
    SLA_MEASURES,
    DashboardFilters,
    decision_condition,
    sla_condition,
    week_end,
)
from reports.models import AgentTally, CaseFact, DashboardRefresh, MonthRollup
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
SLA_MONTHS_SHOWN = 12


def _tenant_id(user) -> int | None:
    return getattr(user, "tenant_id", None)


def _open_cases(user, filters: DashboardFilters):
    return Case.objects.filter(tenant_id=_tenant_id(user), status__in=sorted(OPEN_STATUSES)).filter(filters.on_cases())


def _due_window(field: str, due: str, today: date) -> Q:
    if due == "overdue":
        return Q(**{f"{field}__lt": today})
    return Q(**{f"{field}__gte": today, f"{field}__lte": week_end(today)})


def open_case_counts(*, user, filters: DashboardFilters, today: date) -> dict:
    """The live numbers, in two queries: one pass over the open cases grouped by assignee (with
    the analyst's name) and team — open, overdue, final response overdue and due this week —
    summed here per assignee, per team and in all; and the acknowledgement and response over the
    open cases without a sent notice (one anti-join). On PostgreSQL the first and the cases' side
    of the last are index-only scans of the partial covering index (reports/migrations/0003)."""
    sums = {"open": Count("pk"), "overdue": Count("pk", filter=Q(next_due__lt=today)),
            **{f"close__{due}": Count("pk", filter=_due_window("close_due", due, today)) for due in DUE_STATES}}
    groups = list(_open_cases(user, filters).order_by()
                  .values("assignee_id", "assignee__username", "assigned_team").annotate(**sums))
    by_person: dict[int | None, dict] = {}
    by_team: dict[str, dict] = {}
    names: dict[int | None, str | None] = {}
    totals = dict.fromkeys(sums, 0)
    for group in groups:
        names[group["assignee_id"]] = group["assignee__username"]
        for key, into in ((group["assignee_id"], by_person), (group["assigned_team"], by_team)):
            row = into.setdefault(key, {"open": 0, "overdue": 0})
            row["open"] += group["open"]
            row["overdue"] += group["overdue"]
        for name in sums:
            totals[name] += group[name]
    people = sorted(({"assignee_id": pk, "label": names[pk] or "Unassigned", **row} for pk, row in by_person.items()),
                    key=lambda r: (r["assignee_id"] is None, -r["open"], r["label"]))
    teams = sorted(({"team": team or NONE_VALUE, "label": team or "No team", **row} for team, row in by_team.items()),
                   key=lambda r: (r["team"] == NONE_VALUE, -r["open"], r["label"]))
    return {"workload": {"people": people, "teams": teams},
            "deadlines": _deadline_rows(user, filters, today, close=totals)}


def _deadline_rows(user, filters: DashboardFilters, today: date, *, close: dict) -> list[dict]:
    """The acknowledgement and the response are met once a notice is sent: counted over the open
    cases without one. Only a case with one of those dates on or before Sunday can count, which
    the query says first so the anti-join probes fewer cases."""
    fields = {"acknowledge": "acknowledge_due", "response": "response_due"}
    unsent = (_open_cases(user, filters).order_by()
              .filter(Q(acknowledge_due__lte=week_end(today)) | Q(response_due__lte=week_end(today)))
              .filter(~Q(Exists(Notice.objects.filter(case=OuterRef("pk"), status=NoticeStatus.SENT)))))
    totals = close | unsent.aggregate(**{f"{deadline}__{due}": Count("pk", filter=_due_window(field, due, today))
                                         for deadline, field in fields.items() for due in DUE_STATES})
    return [{"deadline": deadline, "label": label, **{due: totals[f"{deadline}__{due}"] or 0 for due in DUE_STATES}}
            for deadline, label in DEADLINE_TYPES.items()]


def workload(*, user, filters: DashboardFilters, today: date) -> dict:
    """Open cases per analyst (assignee) and per team, each with how many are overdue."""
    return open_case_counts(user=user, filters=filters, today=today)["workload"]


def deadlines_due(*, user, filters: DashboardFilters, today: date) -> list[dict]:
    """Per deadline type: open cases overdue and due this week."""
    return open_case_counts(user=user, filters=filters, today=today)["deadlines"]


def deadline_condition(*, deadline: str, due: str, today: date) -> Q:
    """An open case whose due date of this type is overdue, or due between today and Sunday. The
    acknowledgement and response are met once a notice is sent, the final response once the case
    is decided (cases.deadlines.met_deadlines)."""
    field = {"acknowledge": "acknowledge_due", "response": "response_due", "close": "close_due"}[deadline]
    condition = Q(status__in=sorted(OPEN_STATUSES)) & _due_window(field, due, today)
    if deadline != "close":
        condition &= ~Q(Exists(Notice.objects.filter(case=OuterRef("pk"), status=NoticeStatus.SENT)))
    return condition


def _rollups(user, filters: DashboardFilters):
    return MonthRollup.objects.filter(tenant_id=_tenant_id(user)).filter(filters.on_facts()).order_by()


def _month_sums(user, filters: DashboardFilters) -> list[dict]:
    """The filtered rollups summed per month, newest first (one row per month with cases)."""
    fields = ["received", "decided", "decision_days", *(field for *_, field in DECISION_BUCKETS)]
    fields += [f"{measure}_{outcome}" for measure in SLA_MEASURES for outcome in ("met", "missed")]
    return list(_rollups(user, filters).values("month").annotate(**{field: Sum(field) for field in fields})
                .order_by("-month"))


def historical_numbers(*, user, filters: DashboardFilters) -> dict:
    """The service levels by month and the time to decision, from one query over the rollups."""
    months = _month_sums(user, filters)
    return {"sla": _sla_rows(months), "decisions": _decision_totals(months)}


def sla_by_month(*, user, filters: DashboardFilters) -> list[dict]:
    return _sla_rows(_month_sums(user, filters))


def decision_times(*, user, filters: DashboardFilters) -> dict:
    return _decision_totals(_month_sums(user, filters))


def _sla_rows(months: list[dict]) -> list[dict]:
    """Per month of receipt (the latest SLA_MONTHS_SHOWN with cases): cases received, and for the
    acknowledgement and the answer how many were met and missed (as of the last refresh), with the
    share met of those decided either way."""
    rows = []
    for month in reversed(months[:SLA_MONTHS_SHOWN]):
        row = {"month": month["month"], "received": month["received"]}
        for measure in SLA_MEASURES:
            met, missed = month[f"{measure}_met"], month[f"{measure}_missed"]
            row |= {f"{measure}_met": met, f"{measure}_missed": missed,
                    f"{measure}_rate": round(100 * met / (met + missed)) if met + missed else None}
        rows.append(row)
    return rows


def _decision_totals(months: list[dict]) -> dict:
    """Decided cases by days from receipt to decision (DECISION_BUCKETS), and the mean, over every
    month the filters keep."""
    decided = sum(month["decided"] for month in months)
    days = sum(month["decision_days"] for month in months)
    return {"decided": decided, "mean": round(days / decided, 1) if decided else None,
            "buckets": [{"key": key, "label": label, "count": sum(month[field] for month in months)}
                        for key, label, _low, _high, field in DECISION_BUCKETS]}


def agent_tallies(*, user, filters: DashboardFilters) -> list[dict]:
    """{agent, subject, kind, outcome, count} summed over the filtered months, products and teams."""
    return list(AgentTally.objects.filter(tenant_id=_tenant_id(user)).filter(filters.on_facts()).order_by()
                .values("agent", "subject", "kind", "outcome").annotate(count=Sum("count"))
                .order_by("subject", "agent", "kind", "outcome"))


def filter_choices(*, user) -> dict[str, list[str]]:
    """The teams and products the facts know (for the filter menus)."""
    pairs = MonthRollup.objects.filter(tenant_id=_tenant_id(user)).order_by().values_list("team", "product").distinct()
    teams, products = set(), set()
    for team, product in pairs:
        teams.add(team)
        products.add(product)
    return {"teams": sorted(teams), "products": sorted(products)}


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
