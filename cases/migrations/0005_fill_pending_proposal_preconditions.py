"""Fill the preconditions of proposals still pending (ADR 0006).

A pending proposal depends on the case fields of its kind, with the values they had when it was
made. Those values are rebuilt here from the case's own events up to the proposal's case version
(a small inline replay: migrations do not import application code that may change later)."""

from django.db import migrations

FIELDS = {"status_transition": ("status",), "risk_level": ("risk_level",),
          "assignment": ("assigned_team", "assignee_id")}


def _state_at(events, version: int) -> dict:
    state: dict = {}
    for event in events:
        if event.case_version > version:
            break
        payload = event.payload or {}
        if event.event_type == "case.created":
            state = {"status": payload.get("status") or "new", "risk_level": payload.get("risk_level") or "unassessed",
                     "assigned_team": payload.get("assigned_team") or "", "assignee_id": payload.get("assignee_id")}
        elif event.event_type == "case.transitioned":
            state["status"] = payload["target"]
        elif event.event_type == "case.risk_changed":
            state["risk_level"] = payload["to"]
        elif event.event_type == "case.assigned":
            state["assigned_team"] = payload.get("team", "")
            state["assignee_id"] = payload.get("assignee_id")
    return state


def fill(apps, schema_editor):
    Proposal = apps.get_model("cases", "Proposal")
    CaseEvent = apps.get_model("cases", "CaseEvent")
    for proposal in Proposal.objects.filter(status="pending", preconditions={}).order_by("pk").iterator():
        events = list(CaseEvent.objects.filter(case_id=proposal.case_id).order_by("sequence"))
        state = _state_at(events, proposal.case_version)
        if not state:  # no event log (should not happen): fall back to the case as it is now
            case = proposal.case
            state = {"status": case.status, "risk_level": case.risk_level, "assigned_team": case.assigned_team,
                     "assignee_id": case.assignee_id}
        preconditions = {name: state.get(name) for name in FIELDS.get(proposal.kind, ())}
        Proposal.objects.filter(pk=proposal.pk).update(preconditions=preconditions)


class Migration(migrations.Migration):
    dependencies = [("cases", "0004_proposal_preconditions")]
    operations = [migrations.RunPython(fill, migrations.RunPython.noop)]
