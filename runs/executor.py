"""The run executor (DESIGN §4): the single place a step is executed and committed.

    run_step(run_id=..., worker_id=...)
      1. admit   queued -> running, under the tenant's row lock: at most
                 ARBITER_TENANT_MAX_CONCURRENT_RUNS running per tenant, FIFO, and never before an
                 earlier unfinished run of the same thread.
      2. lease   compare-and-set: UPDATE ... WHERE status = running AND (lease free OR expired);
                 a row count of 0 means another worker has it -> this delivery is a no-op.
      3. check   cancellation requested -> cancelled; a budget exhausted -> failed with the reason.
      4. load    the latest checkpoint (nearest snapshot + deltas, upgraded to the current schema).
      5. run     the current node, OUTSIDE any transaction (model calls are slow); tool effects
                 commit through runs.tools under idempotency keys; everything else is buffered.
      6. commit  ONE transaction: re-check we still hold the lease, then Step + Checkpoint + model
                 calls + findings + artifacts + the node's on_commit writes + audit event + run
                 row (usage, node, status) + lease release. The next step is enqueued with
                 transaction.on_commit, so no worker ever sees a message for an uncommitted step.

A worker that dies mid-step leaves its lease to expire; `lease_reap_expired` (a periodic task)
re-enqueues such runs and the next worker resumes from the last checkpoint. Duplicate or late
deliveries are no-ops: the lease CAS admits one worker, `expected_sequence` drops messages for a
step already done, and Step/Checkpoint are unique per (run, sequence).
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Tenant
from audit.services import audit_record
from cases import policy
from cases.models import Case
from core.actors import Actor
from ops import metrics  # issue 13
from runs.graphs import NodeContext, NodeResult, PendingFinding, UnknownGraph, get_graph
from runs.models import (
    AgentRun,
    Artifact,
    Checkpoint,
    Finding,
    ModelCall,
    RunPhase,
    RunStatus,
    Step,
    StepStatus,
    ToolCall,
    content_hash,
)
from runs.providers.base import ModelOutputError, ModelRequest, ProviderError
from runs.state import CompletedStep, RunState, checkpoint_fields, state_at

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker took this run's lease (ours expired); this worker must stop without committing."""


class StepFailed(Exception):
    """The step cannot succeed; the run fails with this message stored."""

    def __init__(self, message: str, *, code: str):
        super().__init__(message)
        self.code = code


class StepRetry(Exception):
    """A transient failure (a retryable provider error): the step is tried again later."""


@dataclass
class StepOutcome:
    run_id: int
    action: str  # executed | failed | retry | not_admitted | busy | finished | stale | lease_lost | cancelled | missing
    status: str
    sequence: int | None = None
    detail: str = ""
    retry_after: int = 0


def _lease_seconds() -> int:
    return settings.ARBITER_RUN_LEASE_SECONDS


def provider_for_run(run: AgentRun):
    """The model provider a run uses (a setting by default; run_start may name another)."""
    from runs.providers import get_provider

    return get_provider(run.provider_name or None)


def _enqueue(run_id: int, *, expected_sequence: int | None = None, countdown: int = 0) -> None:
    from runs.tasks import enqueue_step

    enqueue_step(run_id, expected_sequence=expected_sequence, countdown=countdown)


def _audit(run: AgentRun, *, action: str, actor_type: str = Actor.AGENT, actor_id: str | None = None,
           decision: str = "", payload: dict | None = None) -> None:
    audit_record(tenant_id=run.tenant_id, case_id=run.case_id, actor_type=actor_type,
                 actor_id=actor_id or run.audit_actor_id, action=action, target_type="run", target_id=run.pk,
                 run_id=str(run.pk), policy_version=policy.POLICY_VERSION, decision=decision, payload=payload or {})


# --- admission ----------------------------------------------------------------------------------

def admission_order(tenant_id: int) -> list[int]:
    """The queued runs of a tenant that may start now, in FIFO order (queued_at, id): no more than
    the free slots under the tenant's cap, skipping runs whose thread has an earlier unfinished
    run. Used by admission (under the tenant lock) and by the pump/reaper to know whom to kick."""
    cap = settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS
    running = AgentRun.objects.filter(tenant_id=tenant_id, status=RunStatus.RUNNING).count()
    slots = cap - running
    if slots <= 0:
        return []
    queued = list(AgentRun.objects.filter(tenant_id=tenant_id, status=RunStatus.QUEUED)
                  .order_by("queued_at", "id").values_list("id", "thread_id"))
    thread_ids = {thread_id for _id, thread_id in queued if thread_id}
    first_unfinished: dict[int, int] = {}
    if thread_ids:
        for thread_id, run_id in (AgentRun.objects.filter(thread_id__in=thread_ids, status__in=RunStatus.unfinished())
                                  .order_by("id").values_list("thread_id", "id")):
            first_unfinished.setdefault(thread_id, run_id)
    order = []
    for run_id, thread_id in queued:
        if thread_id and first_unfinished.get(thread_id) != run_id:
            continue  # an earlier run of this thread is unfinished: replies stay in order
        order.append(run_id)
        if len(order) == slots:
            break
    return order


def _admit(run_id: int) -> bool:
    with transaction.atomic():
        run = AgentRun.objects.filter(pk=run_id).values("tenant_id").first()
        if run is None:
            return False
        # Lock order: tenant, then run. Admissions of one tenant queue here so the cap holds.
        # FOR NO KEY UPDATE, not FOR UPDATE: inserting a row that references the tenant (every
        # audit event does) takes FOR KEY SHARE on it, which FOR UPDATE would block — a worker
        # committing a step (holding its run row) would then wait for us while we wait for its run
        # row: a deadlock. NO KEY UPDATE still excludes the other admitters.
        Tenant.objects.select_for_update(no_key=True).get(pk=run["tenant_id"])
        locked = AgentRun.objects.select_for_update(no_key=True).get(pk=run_id)
        if locked.status != RunStatus.QUEUED:
            return locked.status == RunStatus.RUNNING
        if run_id not in admission_order(locked.tenant_id):
            return False
        now = timezone.now()
        locked.admit()
        locked.started_at = locked.started_at or now
        locked.lease_owner = None
        locked.lease_expires_at = now + timedelta(seconds=_lease_seconds())
        locked.version += 1
        locked.save()
        _audit(locked, action="runs.run.admitted", actor_type=Actor.SYSTEM, actor_id="system:run-executor",
               payload={"queued_at": locked.queued_at.isoformat()})
    return True


def _pump(tenant_id: int) -> None:
    """Kick the queued runs that may start now (after a run left `running`)."""
    for run_id in admission_order(tenant_id):
        _enqueue(run_id)


# --- leases -------------------------------------------------------------------------------------

def _claim_lease(run_id: int, worker_id: str) -> bool:
    now = timezone.now()
    claimed = (AgentRun.objects.filter(pk=run_id, status=RunStatus.RUNNING)
               .filter(Q(lease_owner__isnull=True) | Q(lease_expires_at__lt=now))
               .update(lease_owner=worker_id, lease_expires_at=now + timedelta(seconds=_lease_seconds()),
                       heartbeat_at=now))
    return claimed == 1


def _heartbeat(run_id: int, worker_id: str) -> None:
    now = timezone.now()
    renewed = AgentRun.objects.filter(pk=run_id, lease_owner=worker_id, status=RunStatus.RUNNING).update(
        lease_expires_at=now + timedelta(seconds=_lease_seconds()), heartbeat_at=now)
    if not renewed:
        raise LeaseLost(f"run {run_id}: lease lost by {worker_id}")


def _release_lease(run_id: int, worker_id: str) -> None:
    AgentRun.objects.filter(pk=run_id, lease_owner=worker_id).update(
        lease_owner=None, lease_expires_at=timezone.now() + timedelta(seconds=_lease_seconds()))


def _lock_owned(run_id: int, worker_id: str, sequence: int) -> AgentRun:
    """Inside the commit transaction: the run row, locked, only if this worker still owns it and the
    step is still the next one. Anything else means another worker took over: abort."""
    run = AgentRun.objects.select_for_update(no_key=True).get(pk=run_id)
    if run.lease_owner != worker_id or run.status != RunStatus.RUNNING or run.next_sequence != sequence:
        raise LeaseLost(f"run {run_id}: no longer owned by {worker_id} at step {sequence}")
    return run


def lease_reap_expired(*, now=None) -> list[int]:
    """Re-enqueue running runs whose lease expired (a dead worker) or whose next step was not
    claimed by its deadline (a lost message), and kick queued runs that may start. Enqueuing is
    all it does: run_step's compare-and-set decides who actually runs, so reaping twice is safe."""
    now = now or timezone.now()
    kicked = []
    for run_id, next_sequence in (AgentRun.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=now)
                                  .order_by("lease_expires_at").values_list("id", "next_sequence")):
        _enqueue(run_id, expected_sequence=next_sequence)
        kicked.append(run_id)
    for tenant_id in (AgentRun.objects.filter(status=RunStatus.QUEUED).order_by()
                      .values_list("tenant_id", flat=True).distinct()):
        for run_id in admission_order(tenant_id):
            _enqueue(run_id)
            kicked.append(run_id)
    if kicked:
        logger.info("reaper re-enqueued runs %s", kicked)
    return kicked


# --- budgets ------------------------------------------------------------------------------------

def _budget_exhausted(run: AgentRun) -> str:
    if run.steps_used >= run.max_steps:
        return f"Step budget exhausted: {run.steps_used} of {run.max_steps} steps used."
    if run.tokens_used >= run.max_tokens:
        return f"Token budget exhausted: {run.tokens_used} of {run.max_tokens} tokens used."
    if run.started_at and timezone.now() - run.started_at > timedelta(seconds=run.max_wall_seconds):
        elapsed = int((timezone.now() - run.started_at).total_seconds())
        return f"Wall-time budget exhausted: {elapsed}s of {run.max_wall_seconds}s."
    return ""


# --- model calls (NodeContext.call_model) ----------------------------------------------------

def _jsonable(value):
    return json.loads(json.dumps(value, default=str))


def call_model_for_node(*, ctx: NodeContext, schema, agent: str, extra_context: dict, instructions: str,
                        max_output_tokens: int, extra_source_refs: dict | None = None):
    """Build the context, call the provider, and buffer the ModelCall record (it commits with the
    step, failed or not). Returns (validated output, source refs)."""
    from runs.context import build_context

    run = ctx.run
    used = run.tokens_used + ctx.buffer.tokens
    if used >= run.max_tokens:
        raise StepFailed(f"Token budget exhausted: {used} of {run.max_tokens} tokens used.", code="budget_exhausted")
    ctx.heartbeat()
    built = build_context(run=run, agent=agent, state=ctx.state, case=ctx.case, instructions=instructions,
                          output_schema=schema, extra_context=extra_context, extra_source_refs=extra_source_refs)
    context = _jsonable(built.context)
    record = {"run_id": run.pk, "sequence": ctx.sequence, "attempt": ctx.attempt, "agent": agent,
              "agent_version": ctx.node_def.version, "provider": getattr(ctx.provider, "name", ""),
              "model": getattr(ctx.provider, "model", ""), "output_schema": schema.__name__,
              "messages": built.messages, "context": context, "source_refs": _jsonable(built.source_refs)}
    request = ModelRequest(agent=agent, output_schema=schema, messages=built.messages, context=context,
                           max_output_tokens=max_output_tokens)
    started = time.monotonic()
    try:
        response = ctx.provider.complete(request)
    except ModelOutputError as exc:
        from core.tokens import count_message_tokens

        record |= {"raw_output": exc.raw or "", "error": f"{exc}\n{exc.errors}".strip(),
                   "provider_attempts": exc.attempts, "prompt_tokens": count_message_tokens(built.messages),
                   "latency_ms": int((time.monotonic() - started) * 1000)}
        ctx.buffer.model_calls.append(record)
        raise StepFailed(f"The {agent} model's output was invalid after {exc.attempts} attempt(s): {exc.errors}",
                         code="model_output_invalid") from exc
    except ProviderError as exc:
        record |= {"error": f"{type(exc).__name__}: {exc}", "latency_ms": int((time.monotonic() - started) * 1000)}
        ctx.buffer.model_calls.append(record)
        if exc.retryable:
            raise StepRetry(f"The model provider failed ({exc}); the step will be retried.") from exc
        raise StepFailed(f"The model provider refused the request: {exc}", code="provider_error") from exc
    if not isinstance(response.output, schema):
        record |= {"raw_output": response.raw, "error": f"provider returned {type(response.output).__name__}"}
        ctx.buffer.model_calls.append(record)
        raise StepFailed(f"The {agent} model's output is not a {schema.__name__}.", code="model_output_invalid")
    record |= {"raw_output": response.raw, "validated_output": response.output.model_dump(mode="json"),
               "provider": response.provider, "model": response.model, "prompt_tokens": response.prompt_tokens,
               "completion_tokens": response.completion_tokens, "latency_ms": response.latency_ms,
               "provider_attempts": response.attempts}
    ctx.buffer.model_calls.append(record)
    ctx.buffer.tokens += response.prompt_tokens + response.completion_tokens
    metrics.model_tokens(agent=agent, prompt=response.prompt_tokens, completion=response.completion_tokens)  # issue 13
    ctx.heartbeat()
    return response.output, built.source_refs


# --- the step -------------------------------------------------------------------------------------

def run_step(*, run_id: int, worker_id: str, expected_sequence: int | None = None,
             enqueue: bool = True) -> StepOutcome:
    """Execute the run's next step if this worker can take it; otherwise do nothing.

    `expected_sequence` (set by the task that enqueued this step) turns a late or duplicate
    delivery into a no-op once that step is done. `enqueue=False` leaves the next step to the
    caller (manage.py analyze --inline drives the loop itself)."""
    run_id = int(run_id)  # run ids travel as text on messages and audit rows; compare as numbers
    run = AgentRun.objects.filter(pk=run_id).first()
    if run is None:
        return StepOutcome(run_id, "missing", "")
    if run.is_finished or run.status == RunStatus.WAITING:
        return StepOutcome(run_id, "finished", run.status)
    if expected_sequence is not None and run.next_sequence != expected_sequence:
        return StepOutcome(run_id, "stale", run.status, detail=f"step {expected_sequence} is already done")
    if run.status == RunStatus.QUEUED and not _admit(run_id):
        run.refresh_from_db()
        return StepOutcome(run_id, "not_admitted", run.status)
    if not _claim_lease(run_id, worker_id):
        return StepOutcome(run_id, "busy", RunStatus.RUNNING, detail="another worker holds the lease")
    try:
        return _execute_claimed(run_id=run_id, worker_id=worker_id, expected_sequence=expected_sequence,
                                enqueue=enqueue)
    except LeaseLost as exc:
        logger.warning("%s", exc)
        return StepOutcome(run_id, "lease_lost", RunStatus.RUNNING, detail=str(exc))


def _execute_claimed(*, run_id: int, worker_id: str, expected_sequence: int | None, enqueue: bool) -> StepOutcome:
    run = AgentRun.objects.select_related("tenant").get(pk=run_id)
    sequence = run.next_sequence
    if expected_sequence is not None and sequence != expected_sequence:
        _release_lease(run_id, worker_id)
        return StepOutcome(run_id, "stale", run.status, detail=f"step {expected_sequence} is already done")
    if run.cancel_requested_at:
        return _finish_at_boundary(run_id, worker_id, cancel=True)
    exhausted = _budget_exhausted(run)
    if exhausted:
        return _finish_at_boundary(run_id, worker_id, error=exhausted, code="budget_exhausted")

    state, _ = state_at(run)
    state_before = state.as_dict()
    try:
        graph = get_graph(run.graph)
        node = graph.node(run.current_node)
    except UnknownGraph as exc:
        return _finish_at_boundary(run_id, worker_id, error=str(exc), code="unknown_node")
    case = Case.objects.filter(pk=run.case_id).first() if run.case_id else None
    if case is not None:
        run.case = case
    attempt = int(run.retry_counts.get(str(sequence), 0)) + 1
    state.phase = node.phase
    started_at = timezone.now()
    ctx = NodeContext(run=run, node=node, sequence=sequence, attempt=attempt, state=state, case=case,
                      provider=None, worker_id=worker_id, heartbeat=lambda: _heartbeat(run_id, worker_id))
    from runs.tools import tool_reconcile_unfinished

    # A previous attempt of this step may have died after a tool effect: settle those first.
    ctx.buffer.tool_call_ids.extend(tool_reconcile_unfinished(run=run, sequence=sequence))
    try:
        try:
            ctx.provider = provider_for_run(run)
        except Exception as exc:  # misconfiguration (unknown name, missing key): say so, don't retry
            raise StepFailed(f"The model provider {run.provider_name!r} is not available: {exc}",
                             code="provider_unavailable") from exc
        result = node.run(ctx)
        if not isinstance(result, NodeResult):
            raise StepFailed(f"Node {node.name} returned {result!r}, not a NodeResult.", code="node_error")
        if result.kind == NodeResult.GOTO:
            graph.node(result.next_node)  # an unknown next node fails this step, not the next one
    except LeaseLost:
        raise
    except SoftTimeLimitExceeded:
        # The task's soft time limit: a slow provider, most likely. Give the step another chance.
        return _retry_or_fail(run_id=run_id, worker_id=worker_id, ctx=ctx, started_at=started_at, enqueue=enqueue,
                              message=f"Step {sequence} ({node.name}) exceeded the task's time limit.")
    except StepRetry as exc:
        return _retry_or_fail(run_id=run_id, worker_id=worker_id, ctx=ctx, message=str(exc), started_at=started_at,
                              enqueue=enqueue)
    except StepFailed as exc:
        return _commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, message=str(exc), code=exc.code,
                              started_at=started_at)
    except UnknownGraph as exc:
        return _commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, message=str(exc), code="unknown_node",
                              started_at=started_at)
    except Exception as exc:  # a bug in a node: fail the step with the error stored, don't hang the run
        logger.exception("node %s of run %s crashed", node.name, run_id)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return _commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, message=f"Node {node.name} crashed: "
                              f"{detail}", code="node_error", started_at=started_at)
    try:
        return _commit_step(run_id=run_id, worker_id=worker_id, ctx=ctx, result=result, state_before=state_before,
                            started_at=started_at, enqueue=enqueue)
    except LeaseLost:
        raise
    except Exception as exc:
        # A write the node asked for at commit (ctx.on_commit) refused, or an output did not fit:
        # the commit rolled back as a whole; fail the step rather than retry it forever.
        logger.exception("step %s of run %s could not be committed", sequence, run_id)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return _commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, code="commit_error",
                              message=f"Step {sequence} ({node.name}) could not be committed: {detail}",
                              started_at=started_at)


def _step_row(*, run: AgentRun, ctx: NodeContext, status: str, outcome: str, next_node: str = "",
              summary: str = "", error: str = "", started_at) -> Step:
    finished = timezone.now()
    return Step.objects.create(
        run=run, sequence=ctx.sequence, node=ctx.node, attempt=ctx.attempt, status=status, outcome=outcome,
        next_node=next_node, summary=summary[:2000], error=error, worker_id=ctx.worker_id, tokens=ctx.buffer.tokens,
        started_at=started_at, finished_at=finished,
        duration_ms=max(int((finished - started_at).total_seconds() * 1000), 0))


def _write_buffered(*, run: AgentRun, step: Step | None, ctx: NodeContext, with_outputs: bool) -> dict:
    """Model calls always (what the model saw is kept, failed or not); findings and artifacts
    only when the step succeeded."""
    ModelCall.objects.bulk_create([ModelCall(step=step, **record) for record in ctx.buffer.model_calls])
    if step is not None:
        from runs.tools import tool_abandon_unfinished

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
            contradicts_id=contradicts_id, data=_jsonable(pending.data))
        pending.pk = finding.pk
        written["findings"].append(finding.pk)
    for pending in ctx.buffer.artifacts:
        content = _jsonable(pending.content)
        if pending.findings:
            content["finding_ids"] = [f.pk if isinstance(f, PendingFinding) else int(f) for f in pending.findings]
        artifact = Artifact.objects.create(
            tenant_id=run.tenant_id, case_id=run.case_id, run=run, step=step, kind=pending.kind, content=content,
            content_hash=content_hash(content), source_refs=_jsonable(pending.source_refs),
            schema_version=pending.schema_version, produced_by=pending.produced_by)
        pending.pk = artifact.pk
        written["artifacts"].append(artifact.pk)
    return written


def _commit_step(*, run_id: int, worker_id: str, ctx: NodeContext, result: NodeResult, state_before: dict,
                 started_at, enqueue: bool) -> StepOutcome:
    sequence = ctx.sequence
    with transaction.atomic():
        run = _lock_owned(run_id, worker_id, sequence)
        state: RunState = ctx.state
        state.completed_steps.append(CompletedStep(sequence=sequence, node=ctx.node, outcome=result.kind))
        if state.plan and state.plan[0] == ctx.node:
            state.plan = state.plan[1:]
        if result.kind == NodeResult.END:
            state.phase = RunPhase.DONE
        step = _step_row(run=run, ctx=ctx, status=StepStatus.COMPLETED, outcome=result.kind,
                         next_node=result.next_node or "", summary=result.reason, started_at=started_at)
        written = _write_buffered(run=run, step=step, ctx=ctx, with_outputs=True)
        checkpoint = Checkpoint.objects.create(run=run, sequence=sequence, step=step,
                                               **checkpoint_fields(sequence=sequence, previous=state_before,
                                                                   current=state))
        for write in ctx.buffer.on_commit:
            write(step)

        now = timezone.now()
        run.next_sequence = sequence + 1
        run.steps_used += 1
        run.tokens_used += ctx.buffer.tokens
        run.completed_nodes = [*run.completed_nodes, ctx.node]
        run.retry_counts = {k: v for k, v in run.retry_counts.items() if k != str(sequence)}
        run.phase = state.phase
        run.heartbeat_at = now
        run.lease_owner = None
        run.lease_expires_at = now + timedelta(seconds=_lease_seconds())
        run.version += 1
        run.error, run.error_code = "", ""
        if result.kind == NodeResult.END:
            run.complete()
            run.current_node = ""
            run.finished_at = now
        elif result.kind == NodeResult.WAIT:
            run.wait()
            run.current_node = ctx.node
            run.wait_reason = result.reason[:500]
        else:
            run.current_node = result.next_node
        if run.cancel_requested_at and run.status == RunStatus.RUNNING:
            # Cancellation takes effect at the step boundary: this step's work is kept.
            run.cancel()
            run.finished_at = now
            run.error, run.error_code = "Cancelled at a step boundary.", "cancelled"
        run.save()
        _audit(run, action="runs.step.completed", actor_type=Actor.AGENT, actor_id=ctx.actor.identifier,
               payload={"sequence": sequence, "node": ctx.node, "outcome": result.kind,
                        "next_node": result.next_node or "", "state_hash": checkpoint.state_hash,
                        "tokens": ctx.buffer.tokens, "tool_calls": ctx.buffer.tool_call_ids,
                        "model_calls": len(ctx.buffer.model_calls), **written})
        if run.status != RunStatus.RUNNING:
            _audit(run, action=f"runs.run.{run.status}", decision=run.status,
                   payload={"steps": run.steps_used, "tokens": run.tokens_used, "reason": result.reason or run.error})
            transaction.on_commit(lambda: _pump(run.tenant_id))
        elif enqueue:
            transaction.on_commit(lambda: _enqueue(run.pk, expected_sequence=run.next_sequence))
    return StepOutcome(run_id, "executed", run.status, sequence=sequence, detail=result.reason)


def _commit_failed(*, run_id: int, worker_id: str, ctx: NodeContext, message: str, code: str,
                   started_at) -> StepOutcome:
    with transaction.atomic():
        run = _lock_owned(run_id, worker_id, ctx.sequence)
        step = _step_row(run=run, ctx=ctx, status=StepStatus.FAILED, outcome="failed", error=message,
                         started_at=started_at)
        _write_buffered(run=run, step=step, ctx=ctx, with_outputs=False)
        now = timezone.now()
        run.next_sequence = ctx.sequence + 1
        run.steps_used += 1
        run.tokens_used += ctx.buffer.tokens
        run.fail()
        run.phase = RunPhase.ERROR
        run.error, run.error_code = message, code
        run.finished_at = now
        run.lease_owner, run.lease_expires_at = None, None
        run.version += 1
        run.save()
        _audit(run, action="runs.step.failed", actor_type=Actor.AGENT, actor_id=ctx.actor.identifier,
               decision="failed", payload={"sequence": ctx.sequence, "node": ctx.node, "error": message, "code": code,
                                           "tool_calls": ctx.buffer.tool_call_ids})
        _audit(run, action="runs.run.failed", decision="failed", payload={"error": message, "code": code})
        transaction.on_commit(lambda: _pump(run.tenant_id))
    return StepOutcome(run_id, "failed", RunStatus.FAILED, sequence=ctx.sequence, detail=message)


def _retry_or_fail(*, run_id: int, worker_id: str, ctx: NodeContext, message: str, started_at,
                   enqueue: bool) -> StepOutcome:
    if ctx.attempt > settings.ARBITER_RUN_MAX_STEP_RETRIES:
        return _commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, started_at=started_at, code="provider_error",
                              message=f"{message} Gave up after {ctx.attempt} attempts.")
    backoff = settings.ARBITER_RUN_RETRY_BACKOFF_SECONDS * ctx.attempt
    with transaction.atomic():
        run = _lock_owned(run_id, worker_id, ctx.sequence)
        # No Step row: the step has not happened yet. What the model saw is kept, unlinked.
        _write_buffered(run=run, step=None, ctx=ctx, with_outputs=False)
        now = timezone.now()
        run.retry_counts = {**run.retry_counts, str(ctx.sequence): ctx.attempt}
        run.tokens_used += ctx.buffer.tokens
        run.error, run.error_code = message, "retrying"
        run.lease_owner = None
        run.lease_expires_at = now + timedelta(seconds=backoff + _lease_seconds())
        run.version += 1
        run.save()
        _audit(run, action="runs.step.retried", actor_type=Actor.AGENT, actor_id=ctx.actor.identifier,
               decision="retry", payload={"sequence": ctx.sequence, "node": ctx.node, "attempt": ctx.attempt,
                                          "error": message, "retry_in_seconds": backoff})
        if enqueue:
            transaction.on_commit(lambda: _enqueue(run_id, expected_sequence=ctx.sequence, countdown=backoff))
    return StepOutcome(run_id, "retry", RunStatus.RUNNING, sequence=ctx.sequence, detail=message,
                       retry_after=backoff)


def _finish_at_boundary(run_id: int, worker_id: str, *, cancel: bool = False, error: str = "",
                        code: str = "") -> StepOutcome:
    """End a run between steps (cancellation requested, budget exhausted, unknown node)."""
    with transaction.atomic():
        run = AgentRun.objects.select_for_update(no_key=True).get(pk=run_id)
        if run.lease_owner != worker_id or run.status != RunStatus.RUNNING:
            raise LeaseLost(f"run {run_id}: no longer owned by {worker_id}")
        now = timezone.now()
        if cancel:
            run.cancel()
            run.error, run.error_code = "Cancelled at a step boundary.", "cancelled"
        else:
            run.fail()
            run.error, run.error_code = error, code
        run.phase = RunPhase.DONE if cancel else RunPhase.ERROR
        run.finished_at = now
        run.lease_owner, run.lease_expires_at = None, None
        run.version += 1
        run.save()
        _audit(run, action=f"runs.run.{run.status}", actor_type=Actor.SYSTEM, actor_id="system:run-executor",
               decision=run.status, payload={"reason": run.error, "code": run.error_code,
                                             "steps": run.steps_used, "tokens": run.tokens_used})
        transaction.on_commit(lambda: _pump(run.tenant_id))
    return StepOutcome(run_id, "cancelled" if cancel else "failed", run.status, detail=run.error)


# --- driving a run in-process (manage.py analyze --inline, run_resume --inline) ------------------

def drive_inline(*, run_id: int, worker_id: str, timeout_seconds: float = 600, poll_seconds: float = 0.5,
                 on_step=None) -> AgentRun:
    """Execute a run's steps in this process through run_step (same leases, same commits) until it
    finishes, waits, or the timeout passes. Waits while the run is not admitted or another worker
    holds its lease."""
    run_id = int(run_id)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        outcome = run_step(run_id=run_id, worker_id=worker_id, enqueue=False)
        if on_step is not None and outcome.action == "executed":
            on_step(outcome)
        if outcome.action in ("finished", "missing") or outcome.status in RunStatus.terminal() \
                or outcome.status == RunStatus.WAITING:
            break
        if outcome.action == "retry":
            time.sleep(min(outcome.retry_after, max(deadline - time.monotonic(), 0)))
        elif outcome.action in ("not_admitted", "busy", "lease_lost", "stale"):
            time.sleep(poll_seconds)
    return AgentRun.objects.get(pk=run_id)
