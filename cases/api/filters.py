"""Query parameters of the list endpoints, validated with django-filter.

The FilterSets check and document the parameters (an unknown status is a 400 with the field
named, and drf-spectacular lists them in the schema); the filtering itself is done by the
tenant-scoped selectors the views call with the cleaned values."""

from __future__ import annotations

import django_filters

from audit.models import AuditEvent
from cases.models import (
    Case,
    CaseStatus,
    Notice,
    NoticeStatus,
    Proposal,
    ProposalKind,
    ProposalStatus,
    RiskLevel,
)
from core.api import ChoiceFilter, TextFilter


class CaseFilter(django_filters.FilterSet):
    status = ChoiceFilter(choices=CaseStatus.choices)
    risk_level = ChoiceFilter(choices=RiskLevel.choices)
    search = TextFilter(max_length=200,
                                       help_text="Matches reference, title, company or product (case-insensitive).")

    class Meta:
        model = Case
        fields = ["status", "risk_level", "search"]


class ProposalFilter(django_filters.FilterSet):
    status = ChoiceFilter(choices=ProposalStatus.choices)
    kind = ChoiceFilter(choices=ProposalKind.choices)
    case = TextFilter(max_length=40, help_text="A case reference, e.g. CASE-2026-000042.")

    class Meta:
        model = Proposal
        fields = ["status", "kind", "case"]


class NoticeFilter(django_filters.FilterSet):
    status = ChoiceFilter(choices=NoticeStatus.choices)
    case = TextFilter(max_length=40, help_text="A case reference, e.g. CASE-2026-000042.")

    class Meta:
        model = Notice
        fields = ["status", "case"]


class AuditEventFilter(django_filters.FilterSet):
    action = TextFilter(max_length=100,
                                       help_text="An action or its start, e.g. cases.notice or cases.notice.sent.")
    case = TextFilter(max_length=40, help_text="Only the events of this case (its reference).")
    run_id = TextFilter(max_length=64)

    class Meta:
        model = AuditEvent
        fields = ["action", "case", "run_id"]
