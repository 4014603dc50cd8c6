"""The refresh rebuilds a tenant's dashboard facts from the domain rows (tests/reports/scenario.py)."""

import io
from datetime import date

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Sum

from reports.models import AgentTally, CaseFact, DashboardRefresh, MonthRollup
from reports.services import dashboard_refresh, dashboard_refresh_all
from reports.tasks import dashboard_refresh_task


def facts_of(cases) -> dict:
    return {name: CaseFact.objects.filter(case=case).values(
        "month", "team", "product", "received_on", "acknowledged_on", "decided_on", "days_to_decision").get()
        for name, case in cases.items()}


def test_refresh_writes_one_fact_per_case_with_the_dates_service_levels_need(tenant, dashboard_cases):
    refresh = dashboard_refresh(tenant_id=tenant.pk)
    assert refresh.cases == 5
    facts = facts_of(dashboard_cases)
    assert facts["A"] == {"month": date(2026, 1, 1), "team": "Cards", "product": "Credit card",
                          "received_on": date(2026, 1, 5), "acknowledged_on": date(2026, 1, 10),
                          "decided_on": date(2026, 2, 4), "days_to_decision": 30}
    assert facts["C"]["acknowledged_on"] == date(2026, 2, 27)
    assert facts["C"]["decided_on"] is None
    assert facts["D"]["team"] == "" and facts["D"]["acknowledged_on"] is None
    assert facts["E"]["days_to_decision"] == 70 and facts["E"]["month"] == date(2025, 12, 1)


def test_refresh_counts_each_agent_output_by_how_it_ended(tenant, dashboard_cases):
    dashboard_refresh(tenant_id=tenant.pk)
    tallies = sorted(AgentTally.objects.values_list("agent", "subject", "kind", "outcome", "team", "count"))
    assert tallies == [
        ("agent:adjudicator@1", "dispute", "", "left_to_analyst", "Cards", 1),
        ("agent:adjudicator@1", "dispute", "", "settled_by_rule", "Cards", 1),
        ("agent:adjudicator@1", "dispute", "", "unresolved", "Cards", 1),
        ("agent:notice_drafter@1", "notice", "", "approved_after_edit", "Mortgages", 1),
        ("agent:notice_drafter@1", "notice", "", "approved_as_drafted", "Cards", 1),
        ("agent:notice_drafter@1", "notice", "", "pending", "", 1),
        ("agent:proposer@1", "proposal", "assignment", "withdrawn", "Mortgages", 1),
        ("agent:proposer@1", "proposal", "risk_level", "applied", "Cards", 1),
        ("agent:proposer@1", "proposal", "risk_level", "rejected", "Cards", 1),
        ("agent:proposer@1", "proposal", "status_transition", "stale", "Cards", 1),
    ]


def test_refreshing_twice_gives_the_same_facts(tenant, dashboard_cases):
    dashboard_refresh(tenant_id=tenant.pk)
    first = (facts_of(dashboard_cases), sorted(AgentTally.objects.values_list("agent", "outcome", "count")))
    dashboard_refresh_all()
    assert (facts_of(dashboard_cases), sorted(AgentTally.objects.values_list("agent", "outcome", "count"))) == first
    assert CaseFact.objects.count() == 5
    assert DashboardRefresh.objects.get(tenant=tenant).refreshed_at is not None


def test_refresh_of_one_tenant_leaves_another_alone(tenant, other_tenant, dashboard_cases):
    dashboard_refresh(tenant_id=other_tenant.pk)
    assert CaseFact.objects.count() == 0
    dashboard_refresh(tenant_id=tenant.pk)
    dashboard_refresh(tenant_id=other_tenant.pk)
    assert CaseFact.objects.filter(tenant=tenant).count() == 5


def test_the_command_and_the_beat_task_refresh_every_tenant(tenant, other_tenant, dashboard_cases, settings):
    assert settings.CELERY_BEAT_SCHEDULE["refresh-dashboard"]["task"] == "reports.tasks.dashboard_refresh_task"
    assert dashboard_refresh_task() == 2
    assert CaseFact.objects.count() == 5
    out = io.StringIO()
    call_command("dashboard_refresh", "--tenant", "acme", stdout=out)
    assert "Refreshed the dashboard of acme: 5 case(s)" in out.getvalue()
    with pytest.raises(CommandError, match="No tenant with the slug 'nobody'"):
        call_command("dashboard_refresh", "--tenant", "nobody")


def test_month_rollups_count_missed_dates_as_of_the_refresh_day(tenant, dashboard_cases):
    dashboard_refresh(tenant_id=tenant.pk, today=date(2026, 3, 18))
    january = MonthRollup.objects.filter(month=date(2026, 1, 1)).aggregate(missed=Sum("answer_missed"))
    assert january["missed"] == 0  # B's final response is due on 21 March
    dashboard_refresh(tenant_id=tenant.pk, today=date(2026, 3, 22))
    january = MonthRollup.objects.filter(month=date(2026, 1, 1)).aggregate(missed=Sum("answer_missed"))
    assert january["missed"] == 1
