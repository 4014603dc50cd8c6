"""The dashboard's numbers for tests/reports/scenario.py, worked out by hand in its table."""

from datetime import date

import pytest
from django.utils import timezone

from cases import services
from cases.models import Case, Notice
from reports import selectors
from reports.filters import NONE_VALUE, DashboardFilters
from reports.services import dashboard_refresh
from tests.reports.scenario import DRAFTER, TODAY

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


def test_the_live_numbers_take_two_queries_and_match_their_parts(supervisor, refreshed, django_assert_num_queries):
    with django_assert_num_queries(2):  # open cases grouped (with the names); the notice anti-join
        live = selectors.open_case_counts(user=supervisor, filters=EVERYTHING, today=TODAY)
    assert live["workload"] == selectors.workload(user=supervisor, filters=EVERYTHING, today=TODAY)
    assert live["deadlines"] == selectors.deadlines_due(user=supervisor, filters=EVERYTHING, today=TODAY)


def test_a_date_after_sunday_is_not_counted_and_the_other_date_of_that_case_still_is(supervisor, refreshed):
    # D: its acknowledgement moved to 30 April (after this week), its response to 10 March (overdue).
    # Acknowledgement: B overdue, nothing due this week; response: B and D overdue; final response
    # unchanged (B's, on 21 March).
    Case.objects.filter(pk=refreshed["D"].pk).update(acknowledge_due=date(2026, 4, 30), response_due=date(2026, 3, 10))
    rows = selectors.deadlines_due(user=supervisor, filters=EVERYTHING, today=TODAY)
    assert [(r["deadline"], r["overdue"], r["this_week"]) for r in rows] == [
        ("acknowledge", 1, 0), ("response", 2, 0), ("close", 0, 1)]


def test_a_notice_sent_after_the_refresh_counts_at_once(supervisor, refreshed):
    # The due dates are live, not rolled up: B's notice sent now takes B out of the overdue
    # acknowledgement and response at once, before any refresh.
    notice = services.notice_draft(actor=DRAFTER, case=refreshed["B"], subject="About case B",
                                   body="We received your complaint and are looking into it.")
    Notice.objects.filter(pk=notice.pk).update(status="sent", sent_at=timezone.now())
    rows = selectors.deadlines_due(user=supervisor, filters=EVERYTHING, today=TODAY)
    assert [(r["deadline"], r["overdue"], r["this_week"]) for r in rows] == [
        ("acknowledge", 0, 1), ("response", 0, 1), ("close", 0, 1)]


def test_service_levels_and_decision_times_come_from_one_query_of_the_rollups(supervisor, refreshed,
                                                                               django_assert_num_queries):
    with django_assert_num_queries(1):
        numbers = selectors.historical_numbers(user=supervisor, filters=EVERYTHING)
    assert numbers["sla"] == selectors.sla_by_month(user=supervisor, filters=EVERYTHING)
    assert numbers["decisions"] == selectors.decision_times(user=supervisor, filters=EVERYTHING)
    assert numbers["decisions"]["decided"] == 2 and [row["received"] for row in numbers["sla"]] == [1, 2, 2]
