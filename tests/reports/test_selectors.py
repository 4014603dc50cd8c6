"""The dashboard's numbers for tests/reports/scenario.py, worked out by hand in its table."""

from datetime import date

import pytest

from reports import selectors
from reports.filters import NONE_VALUE, DashboardFilters
from reports.services import dashboard_refresh
from tests.reports.scenario import TODAY

EVERYTHING = DashboardFilters()


@pytest.fixture
def refreshed(tenant, dashboard_cases):
    dashboard_refresh(tenant_id=tenant.pk, today=TODAY)
    return dashboard_cases


def test_workload_per_analyst_and_team(supervisor, analyst, analyst_b, refreshed):
    data = selectors.workload(user=supervisor, filters=EVERYTHING, today=TODAY)
    # Open: B (analyst, Cards, overdue since 4 February), C (analyst_b, Mortgages), D (nobody, no team).
    assert [(r["label"], r["open"], r["overdue"]) for r in data["people"]] == [
        ("analyst", 1, 1), ("analyst_b", 1, 0), ("Unassigned", 1, 0)]
    assert [(r["label"], r["open"], r["overdue"]) for r in data["teams"]] == [
        ("Cards", 1, 1), ("Mortgages", 1, 0), ("No team", 1, 0)]


def test_due_dates_overdue_and_due_this_week_by_type(supervisor, refreshed):
    rows = selectors.deadlines_due(user=supervisor, filters=EVERYTHING, today=TODAY)
    # B: acknowledgement and response overdue (no notice), final response on 21 March (this week);
    # C: a notice was sent, so only its final response runs (11 April); D: both due on 20 March.
    assert [(r["deadline"], r["overdue"], r["this_week"]) for r in rows] == [
        ("acknowledge", 1, 1), ("response", 1, 1), ("close", 0, 1)]


def test_service_levels_by_month(supervisor, refreshed):
    rows = selectors.sla_by_month(user=supervisor, filters=EVERYTHING)
    assert [(r["month"], r["received"], r["acknowledge_met"], r["acknowledge_missed"], r["acknowledge_rate"],
             r["answer_met"], r["answer_missed"], r["answer_rate"]) for r in rows] == [
        (date(2025, 12, 1), 1, 1, 0, 100, 0, 1, 0),  # E: acknowledged in 2 days, decided 10 days late
        (date(2026, 1, 1), 2, 1, 1, 50, 1, 0, 100),  # A on time both; B never acknowledged, answer not due yet
        (date(2026, 2, 1), 2, 0, 1, 0, 0, 0, None),  # C acknowledged 2 days late; D not due yet
    ]


def test_time_from_receipt_to_decision(supervisor, refreshed):
    data = selectors.decision_times(user=supervisor, filters=EVERYTHING)
    assert data["decided"] == 2 and data["mean"] == 50.0  # A in 30 days, E in 70
    assert [(b["key"], b["count"]) for b in data["buckets"]] == [("0-15", 0), ("16-30", 1), ("31-60", 0), ("61-", 1)]


def test_filters_by_team_product_and_month(supervisor, refreshed):
    cards = DashboardFilters(team="Cards")
    assert [r["month"] for r in selectors.sla_by_month(user=supervisor, filters=cards)] == [
        date(2025, 12, 1), date(2026, 1, 1)]
    assert [(r["label"], r["open"]) for r in selectors.workload(user=supervisor, filters=cards, today=TODAY)["people"]] == [
        ("analyst", 1)]
    no_team = DashboardFilters(team=NONE_VALUE)
    assert [(r["label"], r["open"]) for r in selectors.workload(user=supervisor, filters=no_team, today=TODAY)["teams"]] == [
        ("No team", 1)]
    mortgage_february = DashboardFilters(product="Mortgage", month=date(2026, 2, 1))
    rows = selectors.deadlines_due(user=supervisor, filters=mortgage_february, today=TODAY)
    assert [(r["overdue"], r["this_week"]) for r in rows] == [(0, 1), (0, 1), (0, 0)]  # D only
    assert selectors.decision_times(user=supervisor, filters=mortgage_february)["decided"] == 0
    tallies = selectors.agent_tallies(user=supervisor, filters=DashboardFilters(team="Mortgages"))
    assert [(t["subject"], t["kind"], t["outcome"], t["count"]) for t in tallies] == [
        ("notice", "", "approved_after_edit", 1), ("proposal", "assignment", "withdrawn", 1)]


def test_agent_quality_summed_over_every_month(supervisor, refreshed):
    tallies = {(t["agent"], t["kind"], t["outcome"]): t["count"]
               for t in selectors.agent_tallies(user=supervisor, filters=EVERYTHING)}
    assert tallies[("agent:proposer@1", "risk_level", "applied")] == 1
    assert tallies[("agent:proposer@1", "risk_level", "rejected")] == 1
    assert tallies[("agent:notice_drafter@1", "", "approved_after_edit")] == 1
    assert tallies[("agent:adjudicator@1", "", "unresolved")] == 1
    assert sum(tallies.values()) == 10


def test_another_tenant_sees_none_of_it(outsider, refreshed):
    assert selectors.workload(user=outsider, filters=EVERYTHING, today=TODAY) == {"people": [], "teams": []}
    assert selectors.sla_by_month(user=outsider, filters=EVERYTHING) == []
    assert selectors.agent_tallies(user=outsider, filters=EVERYTHING) == []


def test_the_rows_behind_an_agent_number_are_the_ones_counted(supervisor, refreshed):
    rows = selectors.agent_outputs(user=supervisor, subject="notice", agent="agent:notice_drafter@1",
                                   outcome="approved_after_edit", kind=None, filters=EVERYTHING)
    assert [n.case.title for n in rows] == ["Case C"]
    rows = selectors.agent_outputs(user=supervisor, subject="dispute", agent="agent:adjudicator@1",
                                   outcome="settled_by_rule", kind=None, filters=DashboardFilters(team="Cards"))
    assert [a.case.title for a in rows] == ["Case A"]
    rows = selectors.agent_outputs(user=supervisor, subject="proposal", agent="agent:proposer@1",
                                   outcome="rejected", kind="risk_level", filters=EVERYTHING)
    assert [p.case.title for p in rows] == ["Case B"]
