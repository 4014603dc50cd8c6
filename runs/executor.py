"""The run executor (docs/architecture.md, "The run engine"; ADRs 0002 and 0010): the single place a step is executed and committed.

    run_step(run_id=..., worker_id=..., keep_lease=...)
      1. read    the run row (one SELECT, with its case) — unless this worker's own commit kept the
                 lease moments ago: then the row is what that commit wrote (the commit re-checks it,
                 version included) and the case is read when the node first uses it.
      2. admit   queued -> running, under the tenant's row lock: at most
                 ARBITER_TENANT_MAX_CONCURRENT_RUNS running per tenant, FIFO, and never before an
                 earlier unfinished run of the same thread.
      3. lease   a worker still holding a fresh lease from its previous step (keep_lease) writes
                 nothing here; otherwise compare-and-set (runs.leases.lease_claim). A row count of
                 0 means another worker has it -> this delivery is a no-op.
      4. check   cancellation requested -> cancelled; a budget exhausted -> failed with the reason.
      5. state   from this process's cache when the run row's (state_sequence, state_hash) match
                 what this worker committed last; else loaded (nearest snapshot + deltas, upgraded).
      6. run     the current node, OUTSIDE any transaction (model calls are slow), its heartbeat
                 renewed by a thread while it runs; tool effects commit through runs.tools under
                 idempotency keys; everything else is buffered.
      7. commit  ONE transaction, the step's only durable commit: a conditional UPDATE of the run
                 row (still ours, still this step, no cancel pending, same version — it renews or
                 releases the lease and records the new state hash) + Step + Checkpoint (this
                 step's delta; a compaction when the delta chain is due one) + model calls,
                 findings, artifacts + the node's on_commit writes + the audit event. Without
                 keep_lease the next step is enqueued with transaction.on_commit, so no worker sees
                 a message for an uncommitted step.

A steady-state step (same worker, lease kept, state cached, nothing buffered) is ONE statement on
PostgreSQL — its own transaction, one round trip (runs.step_commit) — and six in one transaction
on SQLite. A worker that dies mid-step stops heartbeating; after ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS
another worker may claim the run and the reaper (`lease_reap_expired`) re-enqueues it; the next
worker resumes from the last checkpoint. Duplicate or late deliveries are no-ops: the lease CAS
admits one worker, `expected_sequence` drops messages for a step already done, and
Step/Checkpoint are unique per (run, sequence).
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.actors import Actor
from core.db import is_lock_conflict
from ops import metrics
from runs.admission import admission_order, admit_run, pump_admissions
from runs.graph import NodeContext, NodeResult, UnknownGraph, get_graph
from runs.leases import (
    LeaseLost,
    handoff_deadline,
    heartbeat_scope,
    lease_claim,
    lease_is_fresh,
    lease_release,
    lease_renewal_due,
    lease_seconds,
    runs_to_reap,
    seconds_until_claimable,
    throttled_heartbeat,
)
from runs.model_calls import StepFailed, StepRetry, call_model_for_node, provider_for_run
from runs.models import (
    AgentRun,
    Checkpoint,
    RunPhase,
    RunStatus,
    Step,
    StepStatus,
)
from runs.run_events import audit_run_event, enqueue_next_step
from runs.state import (
    CompletedStep,
    RunState,
    StateDigest,
    StateTracker,
    checkpoint_fields_incremental,
)
from runs.state_cache import STATE_CACHE, CachedState
from runs.state_load import load_chain
from runs.step_commit import commit_in_one_statement
from runs.step_endings import (
    StepOutcome,
    commit_failed,
    commit_with_cancel,
    finish_at_boundary,
    retry_or_fail,
)
from runs.step_rows import step_instance, write_buffered
from runs.step_rows import step_values as step_row_values
from runs.step_sql import (
    Increment,
    insert_returning_pk,
    read_run,
    run_update_if_owned,
    step_commit_if_owned,
)
from runs.tools import tool_reconcile_unfinished

__all__ = ["LeaseLost", "StepFailed", "StepRetry", "StepOutcome", "run_step", "run_steps", "drive_inline",
           "lease_reap_expired", "admission_order", "call_model_for_node", "provider_for_run"]

logger = logging.getLogger(__name__)


# --- the reaper ---------------------------------------------------------------------------------

def lease_reap_expired(*, now=None) -> list[int]:
    """Re-enqueue running runs whose worker died (lease expired or heartbeat timed out) or whose
    next step was not claimed by its hand-off deadline (a lost message), and kick queued runs that
    may start. Enqueuing is all it does: run_step's compare-and-set decides who actually runs, so
    reaping twice is safe."""
    now = now or timezone.now()
    kicked = []
    for run_id, next_sequence in runs_to_reap(now).order_by("lease_expires_at").values_list("id", "next_sequence"):
        enqueue_next_step(run_id, expected_sequence=next_sequence)
        kicked.append(run_id)
    for tenant_id in (AgentRun.objects.filter(status=RunStatus.QUEUED).order_by()
                      .values_list("tenant_id", flat=True).distinct()):
        for run_id in admission_order(tenant_id):
            enqueue_next_step(run_id)
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


# --- the step -------------------------------------------------------------------------------------

def run_step(*, run_id: int, worker_id: str, expected_sequence: int | None = None,
             enqueue: bool = True, keep_lease: bool = False) -> StepOutcome:
    """Execute the run's next step if this worker can take it; otherwise do nothing.

    `expected_sequence` (set by the task that enqueued this step) turns a late or duplicate
    delivery into a no-op once that step is done. `enqueue=False` leaves the next step to the
    caller (manage.py analyze --inline drives the loop itself). `keep_lease=True` (a caller that
    goes on with the next step itself: run_steps, drive_inline) keeps the lease at commit, so the
    next step of this worker needs no claim: one durable commit per step."""
    # Run ids travel as text on messages and audit rows; compare as numbers.
    return _run_step(run_id=int(run_id), worker_id=worker_id, expected_sequence=expected_sequence,
                     enqueue=enqueue, keep_lease=keep_lease)


def _run_step(*, run_id: int, worker_id: str, expected_sequence: int | None, enqueue: bool,
              keep_lease: bool) -> StepOutcome:
    own = STATE_CACHE.own_run(run_id, worker_id, settings.ARBITER_RUN_HEARTBEAT_SECONDS) if keep_lease else None
    if own is not None and (expected_sequence is None or own.run.next_sequence == expected_sequence):
        # This worker's own commit kept the lease moments ago: the row is what that commit wrote,
        # unless someone wrote it since — which this step's commit detects (it requires the same
        # version, no cancel pending, the lease still ours), so the row is not read again. A
        # cancellation requested in between is seen at that commit: the step's work is kept and the
        # run is cancelled at its boundary, as when it is requested while a node runs (ADR 0010).
        run, cached, untouched = own.run, own, True
        # The case is another matter: people change it between steps, and nodes read it (for
        # proposals, citations). Forget the cached one: it is read afresh when the step uses it.
        case_field = AgentRun._meta.get_field("case")
        if case_field.is_cached(run):
            case_field.delete_cached_value(run)
    else:
        run = read_run(run_id)
        if run is None:
            return StepOutcome(run_id, "missing", "")
        if run.is_finished or run.status == RunStatus.WAITING:
            return StepOutcome(run_id, "finished", run.status)
        if expected_sequence is not None and run.next_sequence != expected_sequence:
            return StepOutcome(run_id, "stale", run.status, detail=f"step {expected_sequence} is already done")
        admitted_version = None
        if run.status == RunStatus.QUEUED:
            running, admitted_version = admit_run(run_id, worker_id)
            if not running:
                # Read afresh rather than refresh_from_db: django_fsm's refresh_from_db unprotects
                # the status field class-wide for a moment, which races with other threads.
                run = read_run(run_id) or run
                return StepOutcome(run_id, "not_admitted", run.status)
            run = read_run(run_id)  # admitted (by us or a concurrent delivery): read it again
            if run.status != RunStatus.RUNNING:
                return StepOutcome(run_id, "finished", run.status)
            if expected_sequence is not None and run.next_sequence != expected_sequence:
                return StepOutcome(run_id, "stale", run.status, detail=f"step {expected_sequence} is already done")
        cached = STATE_CACHE.get(run)
        # Nobody wrote the run row since this worker's own last commit — or since this worker
        # admitted the run (no step of it can have been attempted before): no other attempt of
        # this step can have left tool calls behind, so the reconciliation queries are skipped.
        untouched = (cached is not None and cached.run_version == run.version) or (
            admitted_version is not None and run.version == admitted_version)
    if not lease_is_fresh(run, worker_id, timezone.now()) and not lease_claim(run, worker_id):
        return StepOutcome(run_id, "busy", RunStatus.RUNNING, detail="another worker holds the lease",
                           retry_after=seconds_until_claimable(run, timezone.now()))
    started = time.monotonic()
    try:
        outcome = _execute_claimed(run=run, worker_id=worker_id, enqueue=enqueue, keep_lease=keep_lease,
                                   cached=cached, untouched=untouched)
    except LeaseLost as exc:
        STATE_CACHE.drop(run_id)
        logger.warning("%s", exc)
        return StepOutcome(run_id, "lease_lost", RunStatus.RUNNING, detail=str(exc))
    except BaseException:
        STATE_CACHE.drop(run_id)  # the cached state may hold this step's uncommitted changes
        raise
    if outcome.action in ("executed", "failed", "retry", "cancelled"):  # Per step, whoever drives it
        metrics.step_observed(graph=run.graph, outcome=outcome.action, seconds=time.monotonic() - started)
    return outcome


class _StepContext(NodeContext):
    """`ctx.case` is the run's case as the run object holds it: read with the run (one statement),
    or — when the run row was not re-read (a kept lease) — from the database the first time the
    step uses it, so a node never sees a case older than its step."""

    @property
    def case(self):
        return self.run.case if self.run.case_id else None

    @case.setter
    def case(self, value) -> None:  # NodeContext.__init__ assigns it; the run object is the source
        pass


def _load_state(run: AgentRun, cached: CachedState | None) -> CachedState:
    if cached is not None:
        return cached
    state_dict, chain = load_chain(run)
    state = RunState.model_validate(state_dict)
    digest = StateDigest.of_state(state)  # no fetch of the append-only lists' stored items
    return CachedState(sequence=chain.sequence, state_hash=digest.hexdigest(), state=state, digest=digest,
                       chain=chain, run_version=run.version)


def _execute_claimed(*, run: AgentRun, worker_id: str, enqueue: bool, keep_lease: bool,
                     cached: CachedState | None, untouched: bool) -> StepOutcome:
    run_id = run.pk
    sequence = run.next_sequence
    if run.cancel_requested_at:
        return finish_at_boundary(run_id, worker_id, cancel=True)
    exhausted = _budget_exhausted(run)
    if exhausted:
        return finish_at_boundary(run_id, worker_id, error=exhausted, code="budget_exhausted")

    loaded = _load_state(run, cached)
    state = loaded.state
    try:
        graph = get_graph(run.graph)
        node = graph.node(run.current_node)
    except UnknownGraph as exc:
        return finish_at_boundary(run_id, worker_id, error=str(exc), code="unknown_node")
    attempt = int(run.retry_counts.get(str(sequence), 0)) + 1
    tracker = StateTracker(state)
    state.phase = node.phase
    started_at = timezone.now()
    ctx = _StepContext(run=run, node=node, sequence=sequence, attempt=attempt, state=state, case=None,
                      provider=None, worker_id=worker_id, heartbeat=throttled_heartbeat(run_id, worker_id))

    if not untouched:
        # A previous attempt of this step may have died after a tool effect: settle those first.
        ctx.buffer.tool_call_ids.extend(tool_reconcile_unfinished(run=run, sequence=sequence))
    try:
        try:
            ctx.provider = provider_for_run(run)
        except Exception as exc:  # misconfiguration (unknown name, missing key): say so, don't retry
            raise StepFailed(f"The model provider {run.provider_name!r} is not available: {exc}",
                             code="provider_unavailable") from exc
        with heartbeat_scope(run_id, worker_id):
            result = node.run(ctx)
        if not isinstance(result, NodeResult):
            raise StepFailed(f"Node {node.name} returned {result!r}, not a NodeResult.", code="node_error")
        if result.kind == NodeResult.GOTO:
            graph.node(result.next_node)  # an unknown next node fails this step, not the next one
    except LeaseLost:
        raise
    except SoftTimeLimitExceeded:
        # The task's soft time limit: a slow provider, most likely. Give the step another chance.
        return retry_or_fail(run_id=run_id, worker_id=worker_id, ctx=ctx, started_at=started_at, enqueue=enqueue,
                              message=f"Step {sequence} ({node.name}) exceeded the task's time limit.")
    except StepRetry as exc:
        return retry_or_fail(run_id=run_id, worker_id=worker_id, ctx=ctx, message=str(exc), started_at=started_at,
                              enqueue=enqueue)
    except StepFailed as exc:
        return commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, message=str(exc), code=exc.code,
                              started_at=started_at)
    except UnknownGraph as exc:
        return commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, message=str(exc), code="unknown_node",
                              started_at=started_at)
    except Exception as exc:  # a bug in a node: fail the step with the error stored, don't hang the run
        logger.exception("node %s of run %s crashed", node.name, run_id)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, message=f"Node {node.name} crashed: "
                              f"{detail}", code="node_error", started_at=started_at)
    return _commit_or_retry(run=run, worker_id=worker_id, ctx=ctx, node=node, result=result, tracker=tracker,
                            loaded=loaded, started_at=started_at, enqueue=enqueue, keep_lease=keep_lease,
                            untouched=untouched)


def _commit_or_retry(*, run: AgentRun, worker_id: str, ctx: NodeContext, node, result: NodeResult,
                     tracker: StateTracker, loaded: CachedState, started_at, enqueue: bool, keep_lease: bool,
                     untouched: bool) -> StepOutcome:
    """Commit the step; a lock conflict runs it again, any other refusal at commit fails it."""
    run_id, sequence = run.pk, ctx.sequence
    try:
        return _commit_step(run=run, worker_id=worker_id, ctx=ctx, result=result, tracker=tracker, loaded=loaded,
                            started_at=started_at, enqueue=enqueue, keep_lease=keep_lease,
                            check_abandoned=not untouched)
    except LeaseLost:
        raise
    except Exception as exc:
        STATE_CACHE.drop(run_id)
        if is_lock_conflict(exc):
            # A deadlock or serialization failure rolled the whole commit back: nothing of the step
            # is written, so it runs again (bounded by ARBITER_RUN_MAX_STEP_RETRIES), like a
            # retryable provider error: only a conflict that outlasts the retries fails the run.
            logger.warning("step %s of run %s met a lock conflict at commit; it will run again", sequence, run_id)
            return retry_or_fail(run_id=run_id, worker_id=worker_id, ctx=ctx, started_at=started_at, enqueue=enqueue,
                                 message=f"Step {sequence} ({node.name}) met a database lock conflict at commit "
                                         f"and will run again.")
        # A write the node asked for at commit (ctx.on_commit) refused, or an output did not fit:
        # the commit rolled back as a whole; fail the step rather than retry it forever.
        logger.exception("step %s of run %s could not be committed", sequence, run_id)
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return commit_failed(run_id=run_id, worker_id=worker_id, ctx=ctx, code="commit_error",
                              message=f"Step {sequence} ({node.name}) could not be committed: {detail}",
                              started_at=started_at)


def _commit_step(*, run: AgentRun, worker_id: str, ctx: NodeContext, result: NodeResult, tracker: StateTracker,
                 loaded: CachedState, started_at, enqueue: bool, keep_lease: bool,
                 check_abandoned: bool) -> StepOutcome:
    run_id, sequence = run.pk, ctx.sequence
    state: RunState = ctx.state
    state.completed_steps.append(CompletedStep(sequence=sequence, node=ctx.node, outcome=result.kind))
    if state.plan and state.plan[0] == ctx.node:
        state.plan = state.plan[1:]
    if result.kind == NodeResult.END:
        state.phase = RunPhase.DONE
    fields = checkpoint_fields_incremental(delta=tracker.delta(state), state=state, digest=loaded.digest,
                                           chain=loaded.chain, sequence=sequence)
    now = timezone.now()
    keeps = keep_lease and result.kind == NodeResult.GOTO
    values = {
        "next_sequence": sequence + 1, "steps_used": Increment(1), "tokens_used": Increment(ctx.buffer.tokens),
        "retry_counts": {k: v for k, v in run.retry_counts.items() if k != str(sequence)},
        "phase": state.phase, "heartbeat_at": now, "error": "", "error_code": "",
        "lease_owner": worker_id if keeps else None,
        "state_sequence": sequence, "state_hash": fields["state_hash"], "version": Increment(1),
        "updated_at": now,
    }
    if not keeps:
        values["lease_expires_at"] = handoff_deadline(now)
    elif run.lease_owner != worker_id or lease_renewal_due(run, now):
        values["lease_expires_at"] = now + timedelta(seconds=lease_seconds())
    if result.kind == NodeResult.END:
        values |= {"status": RunStatus.COMPLETED, "current_node": "", "finished_at": now}
    elif result.kind == NodeResult.WAIT:
        values |= {"status": RunStatus.WAITING, "current_node": ctx.node, "wait_reason": result.reason[:500]}
    else:
        values |= {"current_node": result.next_node}
    step_values = step_row_values(run_id=run_id, ctx=ctx, status=StepStatus.COMPLETED, outcome=result.kind,
                               next_node=result.next_node or "", summary=result.reason, started_at=started_at)
    checkpoint_values = {"run": run_id, "sequence": sequence, "created_at": now, **fields}
    event_payload = {"sequence": sequence, "node": ctx.node, "outcome": result.kind,
                     "next_node": result.next_node or "", "state_hash": fields["state_hash"],
                     "tokens": ctx.buffer.tokens, "tool_calls": ctx.buffer.tool_call_ids,
                     "model_calls": len(ctx.buffer.model_calls)}
    ordinary = dict(worker_id=worker_id, result=result, fields=fields, state=state, loaded=loaded,
                    values=values, step_values=step_values, checkpoint_values=checkpoint_values,
                    event_payload=event_payload, now=now, enqueue=enqueue, keeps=keeps,
                    check_abandoned=check_abandoned)
    if keeps and not check_abandoned and _nothing_buffered(ctx):
        if commit_in_one_statement(run=run, worker_id=worker_id, ctx=ctx, values=values, step=step_values,
                                   checkpoint=checkpoint_values,
                                   event_payload={**event_payload, "findings": [], "artifacts": []}):
            run = _after_update(run, values, ctx)
            STATE_CACHE.put(run_id, CachedState(sequence=sequence, state_hash=fields["state_hash"], state=state,
                                                digest=loaded.digest, chain=loaded.chain, run_version=run.version,
                                                run=run, worker_id=worker_id, committed_at=time.monotonic()))
            return StepOutcome(run_id, "executed", run.status, sequence=sequence, detail=result.reason)
    return _commit_ordinarily(run=run, ctx=ctx, **ordinary)


def _commit_ordinarily(*, run: AgentRun, worker_id: str, ctx: NodeContext, result: NodeResult, fields: dict,
                       state: RunState, loaded: CachedState, values: dict, step_values: dict,
                       checkpoint_values: dict, event_payload: dict, now, enqueue: bool, keeps: bool,
                       check_abandoned: bool) -> StepOutcome:
    """The step's commit as one transaction (any step; the fallback of the one-statement commit)."""
    run_id, sequence = run.pk, ctx.sequence
    with transaction.atomic():
        # The lease check, the renewal (or release) and the run's new position in one conditional
        # UPDATE, which also takes the run row's lock first (lock order: run, then the rest). On
        # PostgreSQL the Step and Checkpoint rows ride in the same statement.
        step = None
        if connection.vendor == "postgresql":
            step_id = step_commit_if_owned(run_id=run_id, worker_id=worker_id, sequence=sequence,
                                           status=RunStatus.RUNNING, version=run.version, values=values,
                                           step=step_values, checkpoint=checkpoint_values)
            if step_id is not None:
                run = _after_update(run, values, ctx)
                step = step_instance(step_values, step_id)
            else:
                run = commit_with_cancel(run_id=run_id, worker_id=worker_id, sequence=sequence, values=values,
                                          now=now)
        else:
            if run_update_if_owned(run_id=run_id, worker_id=worker_id, sequence=sequence, status=RunStatus.RUNNING,
                                   version=run.version, values=values):
                run = _after_update(run, values, ctx)
            else:
                run = commit_with_cancel(run_id=run_id, worker_id=worker_id, sequence=sequence, values=values,
                                          now=now)
        if step is None:
            step = step_instance(step_values, insert_returning_pk(Step, step_values))
            insert_returning_pk(Checkpoint, {**checkpoint_values, "step": step.pk})
        written = write_buffered(run=run, step=step, ctx=ctx, with_outputs=True, check_abandoned=check_abandoned)
        for write in ctx.buffer.on_commit:
            write(step)
        audit_run_event(run, action="runs.step.completed", actor_type=Actor.AGENT, actor_id=ctx.actor.identifier,
               payload={**event_payload, **written})
        if run.status != RunStatus.RUNNING:
            audit_run_event(run, action=f"runs.run.{run.status}", decision=run.status,
                   payload={"steps": run.steps_used, "tokens": run.tokens_used, "reason": result.reason or run.error})
            tenant_id = run.tenant_id
            transaction.on_commit(lambda: pump_admissions(tenant_id))
        elif enqueue and not keeps:
            next_sequence = run.next_sequence
            transaction.on_commit(lambda: enqueue_next_step(run_id, expected_sequence=next_sequence))
    # Committed: this worker's copy of the state is the run's state now.
    if run.status == RunStatus.RUNNING:
        STATE_CACHE.put(run_id, CachedState(sequence=sequence, state_hash=fields["state_hash"], state=state,
                                            digest=loaded.digest, chain=loaded.chain, run_version=run.version,
                                            **({"run": run, "worker_id": worker_id, "committed_at": time.monotonic()}
                                               if keeps else {})))
    else:
        STATE_CACHE.drop(run_id)
    return StepOutcome(run_id, "executed", run.status, sequence=sequence, detail=result.reason)


def _nothing_buffered(ctx: NodeContext) -> bool:
    buffer = ctx.buffer
    return not (buffer.model_calls or buffer.findings or buffer.artifacts or buffer.tool_call_ids or buffer.on_commit)


def _after_update(run: AgentRun, values: dict, ctx: NodeContext) -> AgentRun:
    """The in-memory run after the step's UPDATE succeeded (no re-read: nobody else may write
    these fields while we hold the lease)."""
    run.steps_used += 1
    run.tokens_used += ctx.buffer.tokens
    run.version += 1
    for name, value in values.items():
        if name in ("steps_used", "tokens_used", "version", "status"):
            continue
        setattr(run, name, value)
    if values.get("status") == RunStatus.COMPLETED:
        run.complete()
    elif values.get("status") == RunStatus.WAITING:
        run.wait()
    return run


# --- driving a run in-process (manage.py analyze --inline, run_resume --inline) ------------------

def run_steps(*, run_id: int, worker_id: str, expected_sequence: int | None = None,
              slice_seconds: float | None = None) -> StepOutcome:
    """What a worker task does with a delivery: execute the run's steps one after the other,
    keeping the lease between them (one commit per step, the state cached), for up to
    `slice_seconds` (ARBITER_RUN_STEP_SLICE_SECONDS); the last step of the slice releases the
    lease and enqueues the next one, so runs share the workers. Returns the last outcome."""
    slice_seconds = settings.ARBITER_RUN_STEP_SLICE_SECONDS if slice_seconds is None else slice_seconds
    deadline = time.monotonic() + slice_seconds
    while True:
        keep = time.monotonic() < deadline
        outcome = run_step(run_id=run_id, worker_id=worker_id, expected_sequence=expected_sequence,
                           enqueue=not keep, keep_lease=keep)
        if outcome.action == "retry" and keep:
            # run_step enqueues a retry only when it hands off; with keep_lease it left it to us.
            enqueue_next_step(outcome.run_id, expected_sequence=outcome.sequence, countdown=outcome.retry_after)
        if outcome.action != "executed" or outcome.status != RunStatus.RUNNING or not keep:
            return outcome
        expected_sequence = outcome.sequence + 1


def drive_inline(*, run_id: int, worker_id: str, timeout_seconds: float = 600, poll_seconds: float = 0.5,
                 on_step=None) -> AgentRun:
    """Execute a run's steps in this process through run_step (same leases, same commits) until it
    finishes, waits, or the timeout passes, keeping the lease between its steps. Waits while the
    run is not admitted or another worker holds its lease; `on_step` is called after each step."""
    run_id = int(run_id)
    deadline = time.monotonic() + timeout_seconds
    try:
        while time.monotonic() < deadline:
            outcome = run_step(run_id=run_id, worker_id=worker_id, enqueue=False, keep_lease=True)
            if on_step is not None and outcome.action == "executed":
                on_step(outcome)
            if outcome.action in ("finished", "missing") or outcome.status in RunStatus.terminal() \
                    or outcome.status == RunStatus.WAITING:
                break
            if outcome.action == "retry":
                time.sleep(min(outcome.retry_after, max(deadline - time.monotonic(), 0)))
            elif outcome.action in ("not_admitted", "busy", "lease_lost", "stale"):
                time.sleep(poll_seconds)
    finally:
        lease_release(run_id, worker_id)  # a no-op unless we stopped while still holding it
    return AgentRun.objects.get(pk=run_id)
