"""Deadlines as domain data: computing due dates from a tenant's DeadlinePolicy and
telling, for each, whether it is met, on time, due soon or overdue.

Pure functions over dates and rows; the writes (intake, policy change, pause, extension, the
crossing events) are in cases.services.deadlines. Business days skip weekends and the public
holidays of the policy's country/subdivision (the `holidays` package)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache

import holidays
from django.utils import timezone

from cases.models import DeadlinePolicy, NoticeStatus, is_settled

# The three due dates, in the order they are shown: (key, Case field, label, policy prefix).
DEADLINES = (
    ("acknowledge", "acknowledge_due", "Acknowledgement"),
    ("response", "response_due", "Response"),
    ("close", "close_due", "Final response"),
)
DEADLINE_FIELDS = tuple(field for _key, field, _label in DEADLINES)
# Every Case field the deadline services write (and the reducer replays).
DEADLINE_STATE_FIELDS = (*DEADLINE_FIELDS, "deadline_policy_version", "deadline_paused_on")

MET, ON_TIME, DUE_SOON, OVERDUE = "met", "on_time", "due_soon", "overdue"
STATE_LABELS = {MET: "Met", ON_TIME: "On time", DUE_SOON: "Due soon", OVERDUE: "Overdue"}


@lru_cache(maxsize=64)
def holiday_calendar(country: str, subdivision: str, year: int) -> frozenset[date]:
    calendar = holidays.country_holidays(country, subdiv=subdivision or None, years=[year])
    return frozenset(calendar.keys())


def is_business_day(day: date, *, country: str, subdivision: str = "") -> bool:
    return day.weekday() < 5 and day not in holiday_calendar(country, subdivision, day.year)


def add_days(start: date, days: int, *, business: bool, country: str = "US", subdivision: str = "") -> date:
    """`days` calendar days after `start`, or `days` business days (weekends and public holidays
    of the country/subdivision skipped)."""
    if not business:
        return start + timedelta(days=days)
    day, left = start, days
    while left > 0:
        day += timedelta(days=1)
        if is_business_day(day, country=country, subdivision=subdivision):
            left -= 1
    return day


def compute_due_dates(policy, start: date) -> dict[str, date]:
    """{Case field: due date} for a case received on `start` under `policy` (a DeadlinePolicy)."""
    due = {}
    for key, field, _label in DEADLINES:
        due[field] = add_days(start, getattr(policy, f"{key}_days"),
                              business=getattr(policy, f"{key}_day_count") == "business",
                              country=policy.country, subdivision=policy.subdivision)
    return due


def validate_region(country: str, subdivision: str) -> str | None:
    """An error message when the `holidays` package does not know the country/subdivision."""
    supported = holidays.list_supported_countries()
    if country not in supported:
        return f"Unknown country {country!r} for public holidays; use an ISO code such as US."
    if subdivision and subdivision not in supported[country]:
        return f"Unknown subdivision {subdivision!r} of {country}; e.g. {', '.join(supported[country][:5])}."
    return None


def deadline_state(due: date | None, *, today: date, due_soon_days: int, met: bool) -> str | None:
    if due is None:
        return None
    if met:
        return MET
    if due < today:
        return OVERDUE
    if (due - today).days <= due_soon_days:
        return DUE_SOON
    return ON_TIME


@dataclass(frozen=True)
class DeadlineState:
    key: str
    label: str
    due: date | None
    state: str | None
    days_left: int | None

    @property
    def state_label(self) -> str:
        return STATE_LABELS.get(self.state, "—")


def notice_sent(case) -> bool:
    """A notice to the consumer has been sent (what meets the acknowledgement and response)."""
    annotated = getattr(case, "notice_sent", None)  # CaseQuerySet.with_deadlines()
    if annotated is not None:
        return bool(annotated)
    return case.notices.filter(status=NoticeStatus.SENT).exists()


def met_deadlines(case) -> set[str]:
    met = set()
    if notice_sent(case):
        met |= {"acknowledge", "response"}
    if is_settled(case.status):
        met.add("close")
    return met


def current_policy_due_soon_days(tenant_id: int) -> int:
    policy = DeadlinePolicy.objects.filter(tenant_id=tenant_id).order_by("-version").first()
    return policy.due_soon_days if policy else DEFAULT_DUE_SOON_DAYS


DEFAULT_DUE_SOON_DAYS = 3


def case_deadline_states(case, *, today: date | None = None, due_soon_days: int | None = None) -> list[DeadlineState]:
    today = today or timezone.localdate()
    if due_soon_days is None:
        due_soon_days = current_policy_due_soon_days(case.tenant_id)
    met = met_deadlines(case)
    states = []
    for key, field, label in DEADLINES:
        due = getattr(case, field)
        states.append(DeadlineState(key=key, label=label, due=due,
                                    state=deadline_state(due, today=today, due_soon_days=due_soon_days,
                                                         met=key in met),
                                    days_left=(due - today).days if due else None))
    return states
