"""Query parameters of the runs and memory list endpoints (validated and documented; the
filtering itself is done by the tenant-scoped selectors the views call)."""

from __future__ import annotations

import django_filters

from core.api import ChoiceFilter, IntegerFilter, TextFilter
from runs.graph import GRAPHS
from runs.models import AgentRun, MemoryRecord, MemoryStatus, RunStatus


class RunFilter(django_filters.FilterSet):
    status = ChoiceFilter(choices=RunStatus.choices)
    case = TextFilter(max_length=40, help_text="A case reference, e.g. CASE-2026-000042.")
    graph = ChoiceFilter(choices=[(name, name) for name in GRAPHS])
    thread = IntegerFilter(min_value=1, help_text="Runs attached to this thread (chat, compaction).")

    class Meta:
        model = AgentRun
        fields = ["status", "case", "graph", "thread"]


class MemoryFilter(django_filters.FilterSet):
    status = ChoiceFilter(choices=MemoryStatus.choices)
    subject = TextFilter(max_length=200,
                                        help_text='"tenant", "user:<id>" or "case:<reference>".')

    class Meta:
        model = MemoryRecord
        fields = ["status", "subject"]
