"""The dashboard's filters (team, product, month) and the same filters as conditions on the case
queue, so a number on the dashboard and the list it links to count the same cases."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from django.db.models import F, Q

SLA_MEASURES = {"acknowledge": "Acknowledged within the due date", "answer": "Answered within the due date"}
# Time from receipt to the standing decision, in days: (key, label, lowest, highest or None, MonthRollup field).
DECISION_BUCKETS = (("0-15", "Within 15 days", 0, 15, "decided_0_15"),
                    ("16-30", "16 to 30 days", 16, 30, "decided_16_30"),
                    ("31-60", "31 to 60 days", 31, 60, "decided_31_60"),
                    ("61-", "More than 60 days", 61, None, "decided_61_plus"))

# A team or product filter for cases that have none (the dashboard groups them under "No team").
NONE_VALUE = "(none)"


def next_month(month: date) -> date:
    return (month.replace(day=28) + timedelta(days=4)).replace(day=1)


def parse_month(text: str) -> date | None:
    """"2026-03" → date(2026, 3, 1); None for anything else."""
    try:
        year, month = (int(part) for part in text.split("-"))
        return date(year, month, 1) if 2000 <= year <= 9999 else None
    except (ValueError, TypeError):
        return None


def week_end(today: date) -> date:
    """The Sunday closing today's week: "due this week" is due from today to then."""
    return today + timedelta(days=6 - today.weekday())


@dataclass(frozen=True)
class DashboardFilters:
    team: str | None = None
    product: str | None = None
    month: date | None = None

    def _blank(self, value: str | None) -> str | None:
        return "" if value == NONE_VALUE else value

    def on_facts(self, prefix: str = "") -> Q:
        """The condition on CaseFact / AgentTally rows (their team, product and month columns), or
        through a relation to CaseFact (`prefix`, e.g. "case__fact__")."""
        condition = Q()
        if self.team is not None:
            condition &= Q(**{f"{prefix}team": self._blank(self.team)})
        if self.product is not None:
            condition &= Q(**{f"{prefix}product": self._blank(self.product)})
        if self.month is not None:
            condition &= Q(**{f"{prefix}month": self.month})
        return condition

    def on_cases(self) -> Q:
        """The condition on Case rows: their team, product, and the month they were received (the
        day they were opened when no receipt date was recorded, as the facts do)."""
        condition = Q()
        if self.team is not None:
            condition &= Q(assigned_team=self._blank(self.team))
        if self.product is not None:
            condition &= Q(product=self._blank(self.product))
        if self.month is not None:
            condition &= received_in(self.month)
        return condition

    def query(self) -> dict[str, str]:
        """The filters as URL parameters (of the dashboard and of the queue alike)."""
        params = {}
        if self.team is not None:
            params["team"] = self.team
        if self.product is not None:
            params["product"] = self.product
        if self.month is not None:
            params["month"] = self.month.strftime("%Y-%m")
        return params


def received_in(month: date) -> Q:
    end = next_month(month)
    return (Q(received_at__gte=month, received_at__lt=end)
            | Q(received_at__isnull=True, created_at__date__gte=month, created_at__date__lt=end))


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
    for key, _label, lowest, highest, _field in DECISION_BUCKETS:
        if key == bucket:
            condition = Q(days_to_decision__gte=lowest)
            return condition & Q(days_to_decision__lte=highest) if highest is not None else condition
    raise ValueError(f"unknown bucket {bucket!r}")
