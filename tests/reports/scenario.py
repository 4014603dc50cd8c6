"""Five cases with hand-set dates, notices, decisions, proposals and disputes, and the dashboard's
numbers for them worked out by hand (the tests assert these, not what the code computes).

Today is Wednesday 18 March 2026; "this week" runs to Sunday 22 March.

| case | team      | assignee  | product     | received   | ack due    | close due  | status               | first notice sent | decided    |
|------|-----------|-----------|-------------|------------|------------|------------|----------------------|-------------------|------------|
| A    | Cards     | analyst   | Credit card | 2026-01-05 | 2026-01-20 | 2026-03-06 | decided              | 2026-01-10        | 2026-02-04 (30 d) |
| B    | Cards     | analyst   | Credit card | 2026-01-20 | 2026-02-04 | 2026-03-21 | under_review         | —                 | —          |
| C    | Mortgages | analyst_b | Mortgage    | 2026-02-10 | 2026-02-25 | 2026-04-11 | waiting_for_evidence | 2026-02-27 (late) | —          |
| D    | —         | —         | Mortgage    | 2026-02-15 | 2026-03-20 | 2026-04-16 | new                  | —                 | —          |
| E    | Cards     | analyst   | Credit card | 2025-12-01 | 2025-12-16 | 2026-01-30 | closed               | 2025-12-03        | 2026-02-09 (70 d) |

(The response is due on the acknowledgement's date in this scenario.)"""

from __future__ import annotations

from datetime import date, datetime
from unittest import mock

from django.utils import timezone

from cases import services
from cases.models import Case, CaseEvent, Notice, Proposal
from core.actors import Actor
from runs.models import AgentRun, Artifact
from tests.factories import make_case

TODAY = date(2026, 3, 18)
PROPOSER = Actor.agent("proposer", "1")
DRAFTER = Actor.agent("notice_drafter", "1")
ADJUDICATOR = "agent:adjudicator@1"

ROWS = {
    "A": ("Cards", "analyst", "Credit card", "2026-01-05", "2026-01-20", "2026-03-06", "decided", "2026-01-10",
          "2026-02-04"),
    "B": ("Cards", "analyst", "Credit card", "2026-01-20", "2026-02-04", "2026-03-21", "under_review", None, None),
    "C": ("Mortgages", "analyst_b", "Mortgage", "2026-02-10", "2026-02-25", "2026-04-11", "waiting_for_evidence",
          "2026-02-27", None),
    "D": ("", None, "Mortgage", "2026-02-15", "2026-03-20", "2026-04-16", "new", None, None),
    "E": ("Cards", "analyst", "Credit card", "2025-12-01", "2025-12-16", "2026-01-30", "closed", "2025-12-03",
          "2026-02-09"),
}


def _noon(day: str) -> datetime:
    return datetime.fromisoformat(f"{day}T12:00:00").replace(tzinfo=timezone.get_current_timezone())


def _case(name: str, people: dict) -> Case:
    team, assignee, product, received, ack_due, close_due, status, _sent, _decided = ROWS[name]
    case = make_case(actor=people["analyst"], title=f"Case {name}", product=product)
    next_due = None
    if status not in ("decided", "closed"):
        open_dates = [date.fromisoformat(close_due)]
        if _sent is None:
            open_dates.append(date.fromisoformat(ack_due))
        next_due = min(open_dates)
    # Set as data (the services would date everything today): status, dates, team and assignee.
    Case.objects.filter(pk=case.pk).update(
        assigned_team=team, assignee=people[assignee] if assignee else None, received_at=date.fromisoformat(received),
        acknowledge_due=date.fromisoformat(ack_due), response_due=date.fromisoformat(ack_due),
        close_due=date.fromisoformat(close_due), next_due=next_due)
    return Case.objects.get(pk=case.pk)


def _sent_notice(case: Case, day: str, *, version: int) -> Notice:
    notice = services.notice_draft(actor=DRAFTER, case=case, subject=f"About {case.title}",
                                   body="We received your complaint and are looking into it.")
    Notice.objects.filter(pk=notice.pk).update(status="sent", sent_at=_noon(day), version=version)
    return notice


def _decision(case: Case, day: str) -> None:
    sequence = case.events.order_by("-sequence").values_list("sequence", flat=True).first() + 1
    with mock.patch("django.utils.timezone.now", return_value=_noon(day)):
        CaseEvent.objects.create(tenant=case.tenant, case=case, sequence=sequence, event_type="case.transitioned",
                                 payload={"transition": "decide", "source": "ready_for_decision",
                                          "target": "decided", "reason": "Upheld."},
                                 case_version=case.version, actor_type="user", actor_id="user:1",
                                 policy_version="test")


def _proposal(case: Case, kind: str, payload: dict, status: str) -> Proposal:
    proposal = services.proposal_create(actor=PROPOSER, case=case, kind=kind, payload=payload,
                                        rationale="Assessed from the narrative.")
    Proposal.objects.filter(pk=proposal.pk).update(status=status)
    return proposal


def _dispute(case: Case, run: AgentRun, resolution: str) -> Artifact:
    return Artifact.objects.create(tenant=case.tenant, case=case, run=run, kind="dispute", content_hash="x" * 64,
                                   content={"topic": "risk level", "positions": ["a", "b"], "resolution": resolution},
                                   produced_by=ADJUDICATOR)


def build(*, analyst, analyst_b) -> dict[str, Case]:
    people = {"analyst": analyst, "analyst_b": analyst_b}
    cases = {name: _case(name, people) for name in ROWS}
    _sent_notice(cases["A"], "2026-01-10", version=1)
    _sent_notice(cases["C"], "2026-02-27", version=2)  # a person edited the agent's draft before approving it
    services.notice_draft(actor=DRAFTER, case=cases["D"], subject="About case D", body="We received your complaint.")
    services.notice_draft(actor=analyst, case=cases["E"], subject="About case E", body="Received.")
    Notice.objects.filter(case=cases["E"]).update(status="sent", sent_at=_noon("2025-12-03"))
    _decision(cases["A"], "2026-02-04")
    _decision(cases["E"], "2026-02-09")
    _proposal(cases["A"], "risk_level", {"risk_level": "high"}, "applied")
    _proposal(cases["B"], "risk_level", {"risk_level": "low"}, "rejected")
    _proposal(cases["B"], "status_transition", {"transition": "triage"}, "stale")
    _proposal(cases["C"], "assignment", {"team": "Cards", "assignee_id": None}, "withdrawn")
    run = AgentRun.objects.create(tenant=cases["A"].tenant, case=cases["A"], graph="case_analysis",
                                  started_by="user:1", provider_name="offline", max_steps=10, max_tokens=1000,
                                  max_wall_seconds=60, queued_at=timezone.now())
    _dispute(cases["A"], run, "Raised to high: policy minimums prevail over the assessed level.")
    _dispute(cases["A"], run, "Needs an analyst: product and issue are left out of notices until an analyst confirms.")
    _dispute(cases["B"], run, "Unresolved: the evidence does not settle it.")
    for name, row in ROWS.items():  # last: the services above refuse some of their work on settled cases
        Case.objects.filter(pk=cases[name].pk).update(status=row[6])
    return {name: Case.objects.get(pk=case.pk) for name, case in cases.items()}
