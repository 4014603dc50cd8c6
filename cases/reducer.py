"""A deterministic reducer: case events in, case state out. `case_replay` compares its result
with the stored row; any difference is drift (`manage.py case_replay`)."""

from __future__ import annotations

from collections.abc import Iterable

# The case fields that events fully determine.
REPLAYED_FIELDS = (
    "reference", "title", "product", "sub_product", "issue", "sub_issue", "company", "consumer_state",
    "tags", "status", "risk_level", "assigned_team", "assignee_id", "resolution", "version",
    # Deadlines: ISO dates in events; cases opened before them replay as None.
    "acknowledge_due", "response_due", "close_due", "deadline_policy_version", "deadline_paused_on",
)
DEADLINE_STATE_FIELDS = ("acknowledge_due", "response_due", "close_due", "deadline_policy_version",
                         "deadline_paused_on")

# Events that change the case row (and so bump its version). Others (notice.*, proposal.*) are
# recorded for the timeline but leave the case as it is.
VERSIONED_EVENTS = frozenset({
    "case.created", "case.transitioned", "case.risk_changed", "case.assigned", "evidence.added",
    "case.deadlines_changed",
})


class ReplayError(Exception):
    pass


def apply_event(state: dict, event_type: str, payload: dict) -> dict:
    state = dict(state)
    if event_type == "case.created":
        if state:
            raise ReplayError("case.created must be the first event")
        state = {field: payload.get(field, "") for field in REPLAYED_FIELDS}
        state["assignee_id"] = payload.get("assignee_id")
        for field in DEADLINE_STATE_FIELDS:
            state[field] = payload.get(field)
        state["version"] = 1
        return state
    if not state:
        raise ReplayError(f"{event_type} before case.created")
    if event_type == "case.transitioned":
        if state["status"] != payload["source"]:
            raise ReplayError(f"transition {payload['transition']} from {payload['source']} but state is "
                              f"{state['status']}")
        state["status"] = payload["target"]
        if "resolution" in payload:
            state["resolution"] = payload["resolution"]
    elif event_type == "case.risk_changed":
        state["risk_level"] = payload["to"]
    elif event_type == "case.assigned":
        state["assigned_team"] = payload.get("team", "")
        state["assignee_id"] = payload.get("assignee_id")
    elif event_type == "case.deadlines_changed":
        for field in DEADLINE_STATE_FIELDS:
            state[field] = payload.get(field)
    if event_type in VERSIONED_EVENTS:
        state["version"] += 1
    return state


def reduce_events(events: Iterable) -> dict:
    """Fold CaseEvent rows (or (event_type, payload) pairs) into a case state dict."""
    state: dict = {}
    for event in events:
        if isinstance(event, tuple):
            event_type, payload = event
        else:
            event_type, payload = event.event_type, event.payload
        state = apply_event(state, event_type, payload)
    return state


def case_state(case) -> dict:
    """The replayed fields of a stored case, as JSON values (dates as ISO strings, like events)."""
    state = {}
    for field in REPLAYED_FIELDS:
        value = getattr(case, field)
        state[field] = value.isoformat() if hasattr(value, "isoformat") else value
    return state


def diff_case(case) -> dict[str, tuple]:
    """{field: (stored, replayed)} for every field where the row and the replay disagree."""
    replayed = reduce_events(case.events.order_by("sequence"))
    stored = case_state(case)
    return {f: (stored[f], replayed.get(f)) for f in REPLAYED_FIELDS if stored[f] != replayed.get(f)}
