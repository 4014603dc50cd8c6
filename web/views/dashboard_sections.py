"""The dashboard's historical sections (service levels, time to decision, agent quality), read from
the refreshed facts, with the link of each number (web.views.dashboard)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse

from reports import selectors
from reports.filters import DashboardFilters
from reports.outcomes import (
    DISPUTE_OUTCOMES,
    NOTICE_OUTCOMES,
    PROPOSAL_KIND_LABELS,
    PROPOSAL_OUTCOMES,
    agent_label,
)
from web.charts import bar_chart


class LinkTo:
    """Links to one list, each with the dashboard's filters and a number's own conditions: the path
    is reversed once per section, not once per number (a page has a few hundred)."""

    def __init__(self, view: str, base: dict, args: list | None = None) -> None:
        self.path, self.base = reverse(view, args=args), base

    def __call__(self, **params) -> str:
        return f"{self.path}?{urlencode({**self.base, **params})}"


def sla_section(rows: list[dict], *, filters: DashboardFilters) -> dict:
    queue = LinkTo("web:case_list", filters.query())
    for row in rows:
        month = row["month"].strftime("%Y-%m")
        row["label"] = row["month"].strftime("%B %Y")
        row["received_href"] = queue(month=month)
        for measure in selectors.SLA_MEASURES:
            for outcome in ("met", "missed"):
                row[f"{measure}_{outcome}_href"] = queue(month=month, sla=f"{measure}_{outcome}")
    chart = bar_chart(
        chart_id="chart-sla", title="Service levels by month received",
        description=("Share of cases acknowledged by the acknowledgement due date and answered by the final "
                     "response due date, of those whose date has come, per month."),
        rows=[(r["label"], [r["acknowledge_rate"], r["answer_rate"]]) for r in rows],
        series=[("Acknowledged on time", "bar--ack"), ("Answered on time", "bar--answer")], unit="%", maximum=100)
    return {"rows": rows, "chart": chart}


def decision_section(data: dict, *, filters: DashboardFilters) -> dict:
    queue = LinkTo("web:case_list", filters.query())
    for bucket in data["buckets"]:
        bucket["href"] = queue(decided_in=bucket["key"])
    data["chart"] = bar_chart(
        chart_id="chart-decisions", title="Time from receipt to decision",
        description="Decided cases by the number of days from the complaint's receipt to the decision.",
        rows=[(b["label"], [b["count"]]) for b in data["buckets"]], series=[("Decided cases", "bar--open")])
    return data


def _grouped(tallies: list[dict], subject: str) -> dict[tuple[str, str], dict[str, int]]:
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for tally in tallies:
        if tally["subject"] == subject:
            groups.setdefault((tally["agent"], tally["kind"]), {})[tally["outcome"]] = tally["count"]
    return groups


def _table(tallies, subject: str, outcomes: dict[str, str], base: dict) -> list[dict]:
    rows = []
    outputs = LinkTo("web:dashboard_agent_outputs", base, args=[subject])
    for (agent, kind), counts in sorted(_grouped(tallies, subject).items()):
        label = agent_label(agent) + (f" — {PROPOSAL_KIND_LABELS.get(kind, kind).lower()}" if kind else "")
        cells = [{"outcome": outcome, "label": outcome_label, "count": counts.get(outcome, 0),
                  "href": outputs(agent=agent, outcome=outcome, **({"kind": kind} if kind else {}))}
                 for outcome, outcome_label in outcomes.items()]
        rows.append({"label": label, "cells": cells, "total": sum(counts.values())})
    return rows


def _share(count: int, total: int) -> int | None:
    return round(100 * count / total) if total else None


def agent_sections(*, user, filters: DashboardFilters) -> dict:
    base = filters.query()
    tallies = selectors.agent_tallies(user=user, filters=filters)
    proposals = _table(tallies, "proposal", PROPOSAL_OUTCOMES, base)
    notices = _table(tallies, "notice", NOTICE_OUTCOMES, base)
    disputes = _table(tallies, "dispute", DISPUTE_OUTCOMES, base)
    for row in proposals:
        counts = {cell["outcome"]: cell["count"] for cell in row["cells"]}
        decided = counts["applied"] + counts["rejected"]
        row["approval_rate"] = _share(counts["applied"], decided)
    for row in notices:
        counts = {cell["outcome"]: cell["count"] for cell in row["cells"]}
        approved = counts["approved_as_drafted"] + counts["approved_after_edit"]
        row["edited_rate"] = _share(counts["approved_after_edit"], approved)
    proposals_chart = bar_chart(
        chart_id="chart-proposals", title="Agents' proposals by how they ended",
        description="For each agent and kind of proposal, how many were approved, rejected, went stale or were withdrawn.",
        rows=[(r["label"], [c["count"] for c in r["cells"][:4]]) for r in proposals],
        series=[("Approved", "bar--ok"), ("Rejected", "bar--overdue"), ("Went stale", "bar--soon"),
                ("Withdrawn", "bar--muted")])
    notices_chart = bar_chart(
        chart_id="chart-notices", title="Notices the agents drafted, edited before approval",
        description="Of each agent's approved notices, the share a person edited before approving.",
        rows=[(r["label"], [r["edited_rate"]]) for r in notices], series=[("Edited before approval", "bar--soon")],
        unit="%", maximum=100)
    return {"proposals": proposals, "notices": notices, "disputes": disputes, "proposals_chart": proposals_chart,
            "notices_chart": notices_chart, "proposal_outcomes": PROPOSAL_OUTCOMES, "notice_outcomes": NOTICE_OUTCOMES,
            "dispute_outcomes": DISPUTE_OUTCOMES}
