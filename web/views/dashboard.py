"""The supervisor's dashboard: workload, due dates, service levels by month, time to decision and
the agents' quality, as charts with their tables, filtered by team, product and month; a CSV of the
same numbers; and the lists behind the agents' numbers. Every number links to the list it counts.

Reads only (reports.selectors); open to the roles that oversee the work (supervisors, auditors,
administrators); an analyst gets 403."""

from __future__ import annotations

import csv
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from cases import policy
from core.errors import Forbidden, Invalid, NotFound
from reports import selectors
from reports.filters import DashboardFilters, week_end
from reports.outcomes import PROPOSAL_KIND_LABELS, agent_label
from web.access import member_required
from web.charts import bar_chart
from web.forms import DashboardFilterForm
from web.views.dashboard_sections import LinkTo, agent_sections, decision_section, sla_section

DASHBOARD_FORBIDDEN_MESSAGE = ("The dashboard is open to supervisors, auditors and administrators. "
                               "Ask a supervisor if you need its numbers.")
OUTPUTS_SHOWN = 200


def require_dashboard_access(user) -> None:
    if user.role not in policy.CAN_SEE_DASHBOARD:
        raise Forbidden(DASHBOARD_FORBIDDEN_MESSAGE)


def _form(request) -> tuple[DashboardFilterForm, DashboardFilters, int]:
    choices = selectors.filter_choices(user=request.user)
    form = DashboardFilterForm(request.GET, teams=choices["teams"], products=choices["products"])
    status = 200 if form.is_valid() else 400
    return form, form.filters(), status


def workload_section(data: dict, *, filters: DashboardFilters) -> dict:
    queue = LinkTo("web:case_list", filters.query())
    for row in data["people"]:
        who = {"assignee": row["assignee_id"]} if row["assignee_id"] else {"view": "unassigned"}
        row["open_href"] = queue(open=1, **who)
        row["overdue_href"] = queue(open=1, due="overdue", **who)
    for row in data["teams"]:
        row["open_href"] = queue(team=row["team"], open=1)
        row["overdue_href"] = queue(team=row["team"], open=1, due="overdue")
    series = [("Open", "bar--open"), ("Overdue", "bar--overdue")]
    data["people_chart"] = bar_chart(
        chart_id="chart-people", title="Open cases per analyst",
        description="Open and overdue cases of each analyst, most open first.",
        rows=[(r["label"], [r["open"], r["overdue"]]) for r in data["people"]], series=series)
    data["teams_chart"] = bar_chart(
        chart_id="chart-teams", title="Open cases per team",
        description="Open and overdue cases of each team, most open first.",
        rows=[(r["label"], [r["open"], r["overdue"]]) for r in data["teams"]], series=series)
    return data


def deadlines_section(rows: list[dict], *, filters: DashboardFilters, today) -> dict:
    queue = LinkTo("web:case_list", filters.query())
    for row in rows:
        row["overdue_href"] = queue(open=1, deadline=row["deadline"], due="overdue")
        row["this_week_href"] = queue(open=1, deadline=row["deadline"], due="this_week")
    chart = bar_chart(chart_id="chart-deadlines", title="Due dates overdue and due this week",
                      description="For each kind of due date, open cases past it and due by Sunday.",
                      rows=[(r["label"], [r["overdue"], r["this_week"]]) for r in rows],
                      series=[("Overdue", "bar--overdue"), ("Due this week", "bar--soon")])
    return {"rows": rows, "chart": chart, "week_end": week_end(today)}


@member_required
def dashboard(request):
    require_dashboard_access(request.user)
    form, filters, status = _form(request)
    today = timezone.localdate()
    user = request.user
    live = selectors.open_case_counts(user=user, filters=filters, today=today)
    historical = selectors.historical_numbers(user=user, filters=filters)
    context = {
        "form": form, "filters": filters, "today": today, "refresh": selectors.last_refresh(user=user),
        "refresh_minutes": round(settings.ARBITER_DASHBOARD_REFRESH_SECONDS / 60),
        "export_query": urlencode(filters.query()),
        "workload": workload_section(live["workload"], filters=filters),
        "deadlines": deadlines_section(live["deadlines"], filters=filters, today=today),
        "sla": sla_section(historical["sla"], filters=filters),
        "decisions": decision_section(historical["decisions"], filters=filters),
        "agents": agent_sections(user=user, filters=filters),
    }
    return render(request, "web/dashboard/dashboard.html", context, status=status)


@member_required
def dashboard_export(request):
    """The dashboard's numbers as CSV, one number a line: section, group, measure, value."""
    require_dashboard_access(request.user)
    form, filters, status = _form(request)
    if status != 200:
        raise Invalid("The filters are not valid: " + " ".join(e for errors in form.errors.values() for e in errors),
                      fields={name: list(errors) for name, errors in form.errors.items()})
    today = timezone.localdate()
    user = request.user
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="dashboard-{today.isoformat()}.csv"'
    writer = csv.writer(response)
    writer.writerow(["section", "group", "measure", "value"])
    for row in export_rows(user=user, filters=filters, today=today):
        writer.writerow(row)
    return response


def export_rows(*, user, filters: DashboardFilters, today) -> list[tuple]:
    rows: list[tuple] = []
    live = selectors.open_case_counts(user=user, filters=filters, today=today)
    for name, key in (("workload per analyst", "people"), ("workload per team", "teams")):
        for row in live["workload"][key]:
            rows += [(name, row["label"], "open", row["open"]), (name, row["label"], "overdue", row["overdue"])]
    for row in live["deadlines"]:
        rows += [("due dates", row["label"], "overdue", row["overdue"]),
                 ("due dates", row["label"], "due this week", row["this_week"])]
    historical = selectors.historical_numbers(user=user, filters=filters)
    for row in historical["sla"]:
        month = row["month"].strftime("%Y-%m")
        rows.append(("service levels", month, "received", row["received"]))
        for measure in selectors.SLA_MEASURES:
            rows += [("service levels", month, f"{measure} met", row[f"{measure}_met"]),
                     ("service levels", month, f"{measure} missed", row[f"{measure}_missed"]),
                     ("service levels", month, f"{measure} met %",
                      "" if row[f"{measure}_rate"] is None else row[f"{measure}_rate"])]
    times = historical["decisions"]
    rows.append(("time to decision", "all decided", "decided", times["decided"]))
    rows.append(("time to decision", "all decided", "mean days", "" if times["mean"] is None else times["mean"]))
    rows += [("time to decision", bucket["label"], "decided", bucket["count"]) for bucket in times["buckets"]]
    for tally in selectors.agent_tallies(user=user, filters=filters):
        group = agent_label(tally["agent"])
        if tally["kind"]:
            group += f" / {PROPOSAL_KIND_LABELS.get(tally['kind'], tally['kind'])}"
        rows.append((f"agent {tally['subject']}s", group, tally["outcome"], tally["count"]))
    return rows


@member_required
def dashboard_agent_outputs(request, subject: str):
    """The proposals, notices or disputes behind one agent-quality number, read live."""
    require_dashboard_access(request.user)
    outcomes = selectors.AGENT_OUTPUT_SUBJECTS.get(subject)
    agent, outcome = request.GET.get("agent", ""), request.GET.get("outcome", "")
    if outcomes is None or not agent or outcome not in outcomes:
        raise NotFound("There is no such list of agent outputs; follow a number on the dashboard.")
    form, filters, status = _form(request)
    kind = request.GET.get("kind") or None
    rows = selectors.agent_outputs(user=request.user, subject=subject, agent=agent, outcome=outcome, kind=kind,
                                   filters=filters)
    total = rows.count()
    context = {"subject": subject, "agent_label": agent_label(agent), "outcome_label": outcomes[outcome],
               "kind_label": PROPOSAL_KIND_LABELS.get(kind, "") if kind else "", "rows": rows[:OUTPUTS_SHOWN],
               "total": total, "shown": min(total, OUTPUTS_SHOWN), "form": form,
               "back_query": urlencode(filters.query())}
    return render(request, "web/dashboard/outputs.html", context, status=status)
