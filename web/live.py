"""What the case page and the run pages need to show progress live: a run's
"step 3 of 8 — risk assessor", and whether the notices section should keep refreshing."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from runs.graph import UnknownGraph, get_graph
from runs.models import RunStatus
from web.labels import words

# An approved notice whose sending was just asked for stays "approved" until a worker claims it:
# the notices section keeps refreshing for this long after the notice last changed.
SEND_WATCH = timedelta(minutes=10)


def run_progress(run) -> dict | None:
    """{"step": 3, "of": 8, "node": "Risk assessor"} for a running run, else None.
    `of` is the graph's plan length (or more, once a re-plan has taken the run past it)."""
    if run.status != RunStatus.RUNNING:
        return None
    try:
        graph = get_graph(run.graph)
        planned, start = len(graph.initial_plan()), graph.start
    except (UnknownGraph, ImportError, AttributeError):
        planned, start = 0, ""
    step = max(1, run.next_sequence)
    node = run.current_node or start
    return {"step": step, "of": max(planned, step), "node": words(node)}


def notices_in_flight(notices) -> bool:
    """True while a notice is being sent, or was approved (or failed) recently enough that a send
    may have been asked for: the section refreshes itself until it reads "sent"."""
    recent = timezone.now() - SEND_WATCH
    for notice in notices or ():
        if notice.status == "sending":
            return True
        if notice.status in ("approved", "failed") and notice.updated_at and notice.updated_at >= recent:
            return True
    return False
