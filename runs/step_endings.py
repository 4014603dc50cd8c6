"""How a step ends other than by its steady-state commit (split from runs.executor, which re-exports
StepOutcome): a cancellation kept at the commit, a failed step, a retry later, a run ended at a step
boundary — each one transaction that checks the lease under the run row's lock — and the helpers
they share with the executor (the step's outcome; enqueuing and the run's audit events are in
runs.run_events)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.actors import Actor
from runs.admission import pump_admissions
from runs.graph import NodeContext
from runs.leases import LeaseLost, handoff_deadline
from runs.models import AgentRun, RunPhase, RunStatus, StepStatus
from runs.run_events import audit_run_event, enqueue_next_step
from runs.state_cache import STATE_CACHE
from runs.step_rows import step_row, write_buffered
from runs.step_sql import Increment


@dataclass
class StepOutcome:
    run_id: int
    action: str  # executed | failed | retry | not_admitted | busy | finished | stale | lease_lost | cancelled | missing
    status: str
    sequence: int | None = None
    detail: str = ""
    retry_after: int = 0


def _lock_owned(run_id: int, worker_id: str, sequence: int) -> AgentRun:
    """Inside a (non-steady) commit transaction: the run row, locked, only if this worker still
    owns it and the step is still the next one. Anything else means another worker took over."""
    run = AgentRun.objects.select_for_update(no_key=True).get(pk=run_id)
    if run.lease_owner != worker_id or run.status != RunStatus.RUNNING or run.next_sequence != sequence:
        raise LeaseLost(f"run {run_id}: no longer owned by {worker_id} at step {sequence}")
    return run


def commit_with_cancel(*, run_id: int, worker_id: str, sequence: int, values: dict, now) -> AgentRun:
    """The step's UPDATE matched nothing: either the lease is gone (LeaseLost, the transaction rolls
    back) or a cancellation was requested while the step ran — then the step's work is kept and the
    run is cancelled at this step boundary."""
    locked = _lock_owned(run_id, worker_id, sequence)
    if locked.cancel_requested_at is None:
        # Still ours at this step, no cancel: someone else wrote the row (its version moved) while
        # the step ran. Its values were computed from a row that is no longer current: stop, and let
        # the next attempt start from a fresh read.
        raise LeaseLost(f"run {run_id}: the run row changed during step {sequence}; the step is not committed")
    AgentRun.objects.filter(pk=run_id).update(**{
        name: F(name) + value.amount if isinstance(value, Increment) else value
        for name, value in values.items()})
    run = AgentRun.objects.select_related("tenant").get(pk=run_id)
    if run.status == RunStatus.RUNNING:
        run.cancel()
        run.finished_at = now
        run.error, run.error_code = "Cancelled at a step boundary.", "cancelled"
        run.lease_owner = None
        run.version += 1
        run.save()
    return run


def commit_failed(*, run_id: int, worker_id: str, ctx: NodeContext, message: str, code: str,
                   started_at) -> StepOutcome:
    STATE_CACHE.drop(run_id)
    with transaction.atomic():
        run = _lock_owned(run_id, worker_id, ctx.sequence)
        step = step_row(run=run, ctx=ctx, status=StepStatus.FAILED, outcome="failed", error=message,
                         started_at=started_at)
        write_buffered(run=run, step=step, ctx=ctx, with_outputs=False)
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
        audit_run_event(run, action="runs.step.failed", actor_type=Actor.AGENT, actor_id=ctx.actor.identifier,
               decision="failed", payload={"sequence": ctx.sequence, "node": ctx.node, "error": message, "code": code,
                                           "tool_calls": ctx.buffer.tool_call_ids})
        audit_run_event(run, action="runs.run.failed", decision="failed", payload={"error": message, "code": code})
        transaction.on_commit(lambda: pump_admissions(run.tenant_id))
    return StepOutcome(run_id, "failed", RunStatus.FAILED, sequence=ctx.sequence, detail=message)


def retry_or_fail(*, run_id: int, worker_id: str, ctx: NodeContext, message: str, started_at,
                   enqueue: bool) -> StepOutcome:
    if ctx.attempt > settings.ARBITER_RUN_MAX_STEP_RETRIES:
        return commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, started_at=started_at, code="provider_error",
                              message=f"{message} Gave up after {ctx.attempt} attempts.")
    backoff = settings.ARBITER_RUN_RETRY_BACKOFF_SECONDS * ctx.attempt
    STATE_CACHE.drop(run_id)
    with transaction.atomic():
        run = _lock_owned(run_id, worker_id, ctx.sequence)
        # No Step row: the step has not happened yet. What the model saw is kept, unlinked.
        write_buffered(run=run, step=None, ctx=ctx, with_outputs=False)
        now = timezone.now()
        run.retry_counts = {**run.retry_counts, str(ctx.sequence): ctx.attempt}
        run.tokens_used += ctx.buffer.tokens
        run.error, run.error_code = message, "retrying"
        run.lease_owner = None
        run.lease_expires_at = handoff_deadline(now, countdown=backoff)
        run.version += 1
        run.save()
        audit_run_event(run, action="runs.step.retried", actor_type=Actor.AGENT, actor_id=ctx.actor.identifier,
               decision="retry", payload={"sequence": ctx.sequence, "node": ctx.node, "attempt": ctx.attempt,
                                          "error": message, "retry_in_seconds": backoff})
        if enqueue:
            transaction.on_commit(lambda: enqueue_next_step(run_id, expected_sequence=ctx.sequence, countdown=backoff))
    return StepOutcome(run_id, "retry", RunStatus.RUNNING, sequence=ctx.sequence, detail=message,
                       retry_after=backoff)


def finish_at_boundary(run_id: int, worker_id: str, *, cancel: bool = False, error: str = "",
                        code: str = "") -> StepOutcome:
    """End a run between steps (cancellation requested, budget exhausted, unknown node)."""
    STATE_CACHE.drop(run_id)
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
        audit_run_event(run, action=f"runs.run.{run.status}", actor_type=Actor.SYSTEM, actor_id="system:run-executor",
               decision=run.status, payload={"reason": run.error, "code": run.error_code,
                                             "steps": run.steps_used, "tokens": run.tokens_used})
        transaction.on_commit(lambda: pump_admissions(run.tenant_id))
    return StepOutcome(run_id, "cancelled" if cancel else "failed", run.status, detail=run.error)
