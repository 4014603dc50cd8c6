"""What the run engine tells the task logs and metrics (ops.celery_signals) about a run step task:
the ids of its run, and whether the step finished the run. Registered from RunsConfig.ready()."""

from __future__ import annotations

from ops import metrics
from runs.models import AgentRun

FINISHED = ("completed", "failed", "cancelled")


def run_ids(run_id: int) -> dict:
    row = (AgentRun.objects.filter(pk=run_id)
           .values("tenant_id", "case_id", "graph", "next_sequence", "status").first())
    if row is None:
        return {"run_id": run_id}
    return {"run_id": run_id, "tenant_id": row["tenant_id"], "case_id": row["case_id"],
            "step": row["next_sequence"], "graph": row["graph"], "status_before": row["status"]}


def observe_run_step(info: dict, retval: str) -> None:
    """A step that ended its run counts in arbiter_runs_finished_total, labelled with its graph."""
    if retval not in ("executed", "failed", "cancelled") or not info.get("run_id"):
        return
    status = AgentRun.objects.filter(pk=info["run_id"]).values_list("status", flat=True).first()
    if status in FINISHED and status != info.get("status_before"):
        metrics.run_finished(graph=info.get("graph", "unknown"), status=status)
