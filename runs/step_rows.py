"""The rows a step writes besides its checkpoint (ADR 0010): the Step row, the model calls, tool call
links, findings and artifacts a node buffered. Used by runs.executor inside the step's commit."""

from __future__ import annotations

from django.utils import timezone

from runs.graph import NodeContext, PendingFinding
from runs.model_calls import jsonable
from runs.models import AgentRun, Artifact, Finding, ModelCall, Step, ToolCall, content_hash
from runs.step_sql import insert_returning_pk
from runs.tools import tool_abandon_unfinished


def step_values(*, run_id: int, ctx: NodeContext, status: str, outcome: str, next_node: str = "",
                summary: str = "", error: str = "", started_at) -> dict:
    finished = timezone.now()
    return {"run": run_id, "sequence": ctx.sequence, "node": ctx.node, "attempt": ctx.attempt, "status": status,
            "outcome": outcome, "next_node": next_node, "summary": summary[:2000], "error": error,
            "worker_id": ctx.worker_id, "tokens": ctx.buffer.tokens, "started_at": started_at,
            "finished_at": finished, "duration_ms": max(int((finished - started_at).total_seconds() * 1000), 0),
            "copied_from": None}


def step_instance(values: dict, pk: int) -> Step:
    step = Step(**{("run_id" if k == "run" else "copied_from_id" if k == "copied_from" else k): v
                   for k, v in values.items()})
    step.pk = pk
    step._state.adding = False
    return step


def step_row(*, run: AgentRun, ctx: NodeContext, status: str, outcome: str, next_node: str = "",
             summary: str = "", error: str = "", started_at) -> Step:
    values = step_values(run_id=run.pk, ctx=ctx, status=status, outcome=outcome, next_node=next_node,
                         summary=summary, error=error, started_at=started_at)
    return step_instance(values, insert_returning_pk(Step, values))


def write_buffered(*, run: AgentRun, step: Step | None, ctx: NodeContext, with_outputs: bool,
                   check_abandoned: bool = True) -> dict:
    """Model calls always (what the model saw is kept, failed or not); findings and artifacts
    only when the step succeeded. `check_abandoned=False`: no tool call of this step can be left
    `started` (no earlier attempt, none made now), so the query for them is skipped."""
    if ctx.buffer.model_calls:
        ModelCall.objects.bulk_create([ModelCall(step=step, **record) for record in ctx.buffer.model_calls])
    if step is not None and (check_abandoned or ctx.buffer.tool_call_ids):

        ctx.buffer.tool_call_ids.extend(tool_abandon_unfinished(run=run, sequence=ctx.sequence))
    if ctx.buffer.tool_call_ids and step is not None:
        ToolCall.objects.filter(pk__in=ctx.buffer.tool_call_ids, run=run).update(step=step)
    written = {"findings": [], "artifacts": []}
    if not with_outputs:
        return written
    for pending in ctx.buffer.findings:
        contradicts = pending.contradicts
        contradicts_id = contradicts.pk if isinstance(contradicts, PendingFinding) else contradicts
        finding = Finding.objects.create(
            tenant_id=run.tenant_id, case_id=run.case_id, run=run, step=step, agent=pending.agent, type=pending.type,
            summary=pending.summary, evidence_refs=pending.evidence_refs, confidence=pending.confidence,
            contradicts_id=contradicts_id, data=jsonable(pending.data))
        pending.pk = finding.pk
        written["findings"].append(finding.pk)
    for pending in ctx.buffer.artifacts:
        content = jsonable(pending.content)
        if pending.findings:
            content["finding_ids"] = [f.pk if isinstance(f, PendingFinding) else int(f) for f in pending.findings]
        artifact = Artifact.objects.create(
            tenant_id=run.tenant_id, case_id=run.case_id, run=run, step=step, kind=pending.kind, content=content,
            content_hash=content_hash(content), source_refs=jsonable(pending.source_refs),
            schema_version=pending.schema_version, produced_by=pending.produced_by)
        pending.pk = artifact.pk
        written["artifacts"].append(artifact.pk)
    return written
