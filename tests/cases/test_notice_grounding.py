"""The offline drafter's notices are grounded: on every complaint of the CFPB sample the analyst
learns from (analyst/data/cfpb_complaints.csv, 191 complaints) and on every demo case (a subset of
it, cases/demo_data), the notice it drafts from the case's stored due dates and the triage's
consumer request has no flag from the notice checker."""

import csv
from datetime import date
from pathlib import Path

from django.conf import settings

from agents.context import case_snapshot
from agents.graphs.guards import request_to_address
from analyst.provider import OfflineAnalyst
from analyst.registry import AGENTS
from cases import services
from cases.models import CaseEvent
from cases.notice_checker import check_notice
from runs.providers import ModelRequest

SAMPLE = Path(settings.BASE_DIR) / "analyst" / "data" / "cfpb_complaints.csv"
DEMO = Path(settings.BASE_DIR) / "cases" / "demo_data" / "cfpb_complaints_sample.csv"
TODAY = date(2026, 11, 26)


def _rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _ask(agent: str, context: dict) -> dict:
    response = OfflineAnalyst().complete(ModelRequest(agent=agent, output_schema=AGENTS[agent][1], messages=[],
                                                      context=context))
    return response.output.model_dump(mode="json")


def _draft_for(case, *, today: date) -> dict:
    """What the graph's notice_drafter node gives the offline drafter (agents/graphs/case_analysis.py)."""
    evidence = [{"id": e.pk, "title": e.title, "text": e.read_text()} for e in case.evidence.all()]
    context = {"today": today.isoformat(), "case": case_snapshot(case), "evidence": evidence, "prior": {},
               "notices": []}
    for agent in ("triage", "risk_assessor"):
        context["prior"][agent] = _ask(agent, context)
    triaged = context["prior"]["triage"]
    detail = triaged.get("consumer_request") or {}
    request = request_to_address(detail or triaged.get("requested_remedy"))
    context |= {"due_dates": {f: getattr(case, f).isoformat() for f in ("acknowledge_due", "response_due",
                                                                       "close_due")},
                "notice_sent": False, "response_late": case.response_due < today, "consumer_request": request,
                "consumer_request_detail": detail}
    return _ask("notice_drafter", context) | {"consumer_request": request}


def _open_cases(rows: list[dict], analyst, supervisor) -> list:
    cases = []
    for row in rows:
        case = services.case_create(
            actor=analyst, tenant=analyst.tenant, title=f"Complaint {row['Complaint ID']}",
            received_at=date.fromisoformat(row["Date received"][:10]), narrative=row["Consumer complaint narrative"],
            product=row["Product"][:200], sub_product=row["Sub-product"][:200], issue=row["Issue"][:300],
            sub_issue=row["Sub-issue"][:300], company=row["Company"][:200], consumer_state=row["State"][:10],
            tags=row["Tags"][:200], complainant_email="consumer@example.org", source="cfpb",
            source_reference=row["Complaint ID"])
        services.case_transition(actor=supervisor, case=case, transition="triage")
        cases.append(case)
    return cases


def _flags(cases, *, today: date) -> dict[str, list]:
    flagged = {}
    for case in cases:
        draft = _draft_for(case, today=today)
        flags = check_notice(case=case, recipient=case.complainant_email, subject=draft["subject"], body=draft["body"],
                             consumer_request=draft["consumer_request"], today=today)
        if flags:
            flagged[case.source_reference] = flags
    return flagged


def test_the_offline_drafter_has_no_flags_on_any_cfpb_complaint(analyst, supervisor):
    rows = _rows(SAMPLE)
    assert len(rows) > 150  # 191 complaints (narratives span lines)
    cases = _open_cases(rows, analyst, supervisor)
    # Every complaint is long past its due dates today: the drafts say they are late and promise none.
    assert _flags(cases, today=TODAY) == {}
    # A fresh case, its due dates ahead: the draft promises the stored response date.
    fresh = _open_cases(rows[:1], analyst, supervisor)[0]
    draft = _draft_for(fresh, today=fresh.received_at)
    due = fresh.response_due
    assert f"our response by {due.day} {due:%B %Y}." in draft["body"]  # the stored date, in words
    assert _flags([fresh], today=fresh.received_at) == {}


def test_the_offline_drafter_has_no_flags_on_the_demo_cases(analyst, supervisor):
    rows = _rows(DEMO)
    cases = _open_cases(rows, analyst, supervisor)
    assert _flags(cases, today=TODAY) == {}
    assert CaseEvent.objects.filter(event_type="case.created").count() == len(rows)
