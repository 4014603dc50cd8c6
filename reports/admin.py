"""The dashboard's derived tables, read-only for operators (a refresh rebuilds them: the
`dashboard_refresh` command or its beat task)."""

from django.contrib import admin

from cases.admin import ReadOnlyAdmin
from reports.models import AgentTally, CaseFact, DashboardRefresh, MonthRollup


@admin.register(DashboardRefresh)
class DashboardRefreshAdmin(ReadOnlyAdmin):
    list_display = ("tenant", "refreshed_at", "cases", "duration_ms")


@admin.register(CaseFact)
class CaseFactAdmin(ReadOnlyAdmin):
    list_display = ("case", "month", "product", "team", "acknowledged_on", "decided_on", "days_to_decision")
    list_filter = ("month",)
    list_select_related = ("case",)


@admin.register(MonthRollup)
class MonthRollupAdmin(ReadOnlyAdmin):
    list_display = ("month", "product", "team", "received", "acknowledge_met", "acknowledge_missed",
                    "answer_met", "answer_missed", "decided")
    list_filter = ("month",)


@admin.register(AgentTally)
class AgentTallyAdmin(ReadOnlyAdmin):
    list_display = ("agent", "subject", "kind", "outcome", "month", "product", "team", "count")
    list_filter = ("subject", "outcome")
