"""The write paths of runs: start, cancel, resume and fork runs; govern memory.

Keyword-only; `actor` is an Actor or a user. Each function checks permission and state, writes its
rows and an audit event in one transaction, enqueues work only on commit, and raises a
core.errors.DomainError — changing nothing — when it refuses. Steps themselves are executed and
committed only by runs.executor.run_step."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Tenant
from audit.services import audit_record
from cases import policy
from cases.models import Case
from core.actors import Actor, coerce_actor
from core.errors import Forbidden, Invalid, NotAllowed, NotFound
from ops import metrics
from outbox.services import outbox_enqueue
from runs import providers
from runs.admission import pump_admissions
from runs.graph import UnknownGraph, get_graph
from runs.memory import memory_confirm, memory_forget, memory_propose
from runs.models import AgentRun, Artifact, Checkpoint, Finding, RunStatus, Step
from runs.state import RunState, checkpoint_fields
from runs.state_load import state_at

__all__ = ["run_start", "run_cancel", "run_resume", "run_fork", "memory_propose", "memory_confirm",
           "memory_forget"]

CAN_MANAGE_RUNS = frozenset({policy.ANALYST, policy.SUPERVISOR, policy.ADMIN})
BUDGET_FIELDS = {"max_steps": "ARBITER_RUN_MAX_STEPS", "max_tokens": "ARBITER_RUN_MAX_TOKENS",
                 "max_wall_seconds": "ARBITER_RUN_MAX_WALL_SECONDS"}


def _check_actor(actor: Actor, tenant_id: int, what: str) -> None:
    if actor.is_user:
        if actor.user.tenant_id != tenant_id:
            raise NotFound("No such run.")
        if actor.role not in CAN_MANAGE_RUNS:
            raise Forbidden(f"Your role ({actor.role}) cannot {what}; analysts, supervisors and admins can.")
    elif actor.is_agent:
        raise Forbidden(f"Agents cannot {what}; a person or the system does.")


def _budget(budget: dict | None, defaults: dict[str, int]) -> dict[str, int]:
    budget = dict(budget or {})
    unknown = set(budget) - set(BUDGET_FIELDS)
    if unknown:
        raise Invalid(f"Unknown budget fields: {', '.join(sorted(unknown))}.",
                      fields={"budget": [f"Use {', '.join(BUDGET_FIELDS)}."]})
    values = {}
    for name in BUDGET_FIELDS:
        value = budget.get(name, defaults[name])
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Invalid("The budget is not valid.", fields={name: ["A whole number of at least 1."]})
        values[name] = value
    return values


def _default_budget() -> dict[str, int]:
    return {name: getattr(settings, setting) for name, setting in BUDGET_FIELDS.items()}


def _provider(name: str | None):
    name = name or settings.ARBITER_MODEL_PROVIDER
    try:
        return name, providers.get_provider(name)
    except Exception as exc:  # unknown name, or a real provider without its settings
        raise Invalid(f"The model provider {name!r} cannot be used: {exc}",
                      fields={"provider": [str(exc)]}) from None


def _audit(run: AgentRun, *, actor: Actor, action: str, decision: str = "", payload: dict | None = None) -> None:
    audit_record(tenant_id=run.tenant_id, case_id=run.case_id, actor_type=actor.kind, actor_id=actor.identifier,
                 action=action, target_type="run", target_id=run.pk, run_id=str(run.pk),
                 policy_version=policy.POLICY_VERSION, decision=decision, payload=payload or {})


def _enqueue_on_commit(run_id: int, *, dedupe_key: str | None = None) -> None:
    """The run's next step goes through the transactional outbox: the row commits with
    the run, is published right after the commit if the broker is up, and is relayed later if it is
    not — so a request that committed a run never fails because of the broker, and the step is
    never lost. The executor's own step-to-step enqueues are its business (runs/executor.py)."""

    outbox_enqueue(task="runs.tasks.run_step_task", kwargs={"run_id": run_id, "expected_sequence": None},
                   dedupe_key=dedupe_key)


def _active_case_run(*, case: Case, graph: str) -> AgentRun | None:
    """The queued or running run of `graph` on `case` (not in a thread), under the case's row lock:
    two concurrent starts serialise here, and the second finds the first's run. FOR NO KEY UPDATE
    does not block the many rows that merely reference the case (events, audit, runs of other graphs)."""
    Case.objects.select_for_update(no_key=True).filter(pk=case.pk).first()
    return (AgentRun.objects.filter(case=case, graph=graph, thread__isnull=True,
                                    status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).order_by("id").first())


@transaction.atomic
def run_start(*, actor, case: Case | None = None, thread=None, tenant: Tenant | None = None,
              graph: str = "case_analysis", input: dict | None = None, provider: str | None = None,
              budget: dict | None = None, enqueue: bool = True) -> AgentRun:
    """Queue a run of `graph` on a case and/or a thread (any object with pk and tenant_id).

    Writes the run (status queued), its initial checkpoint (sequence 0, a full snapshot) and an
    audit event; enqueues the first step through the outbox (admission then decides when it starts:
    tenant cap, FIFO, per-thread order). Idempotent for case runs: while a run of the same graph is
    queued or running on the case (outside any thread), starting another returns that run and writes
    nothing (a double click, a retried request, two people at once). Refuses (nothing written, nothing queued): an unknown graph or
    provider, a missing case for a graph that needs one, mismatched tenants, a bad budget
    (Invalid); agents and roles that cannot start runs (Forbidden); another tenant's case (NotFound)."""
    actor = coerce_actor(actor)
    try:
        definition = get_graph(graph)
    except UnknownGraph as exc:
        raise Invalid(str(exc), fields={"graph": [str(exc)]}) from None
    tenant_ids = {obj.tenant_id for obj in (case, thread) if obj is not None} | ({tenant.pk} if tenant else set())
    if len(tenant_ids) != 1:
        raise Invalid("A run needs a case, a thread or a tenant, all of the same tenant.")
    tenant_id = tenant_ids.pop()
    _check_actor(actor, tenant_id, "start runs")
    if definition.requires_case and case is None:
        raise Invalid(f"The {graph} graph runs on a case; give one.", fields={"case": ["Required."]})
    if thread is not None and case is not None and getattr(thread, "case_id", case.pk) not in (None, case.pk):
        raise Invalid("The thread belongs to another case.")
    input = dict(input or {})
    try:
        json.dumps(input)
    except TypeError:
        raise Invalid("The run's input must be JSON data.", fields={"input": ["Not JSON-serialisable."]}) from None
    limits = _budget(budget, _default_budget())
    provider_name, provider_obj = _provider(provider)
    if case is not None and thread is None:
        active = _active_case_run(case=case, graph=definition.name)
        if active is not None:
            active.already_active = True  # callers may say "an analysis is already running"
            return active
    now = timezone.now()
    run = AgentRun.objects.create(
        tenant_id=tenant_id, case=case, thread_id=thread.pk if thread is not None else None, graph=definition.name,
        graph_version=definition.version, input=input, current_node=definition.start, **limits,
        started_by=actor.identifier, started_by_user=actor.user if actor.is_user else None,
        provider_name=provider_name, model_name=getattr(provider_obj, "model", ""),
        prompt_versions=definition.prompt_versions, queued_at=now)
    state = RunState(goal=definition.initial_goal(input, case), plan=definition.initial_plan(), phase="planning")
    Checkpoint.objects.create(run=run, sequence=0, **checkpoint_fields(sequence=0, previous=None, current=state))
    _audit(run, actor=actor, action="runs.run.started",
           payload={"graph": run.graph, "provider": provider_name, "model": run.model_name, "budget": limits,
                    "thread_id": run.thread_id, "input": input})
    transaction.on_commit(lambda: metrics.run_started(graph=run.graph))
    if enqueue:
        _enqueue_on_commit(run.pk, dedupe_key=f"run-start:{run.pk}")
    return run


def _lock_run(run: AgentRun) -> AgentRun:
    return AgentRun.objects.select_for_update(no_key=True).get(pk=run.pk)


def _lease_is_free(run: AgentRun, now) -> bool:
    return run.lease_owner is None or (run.lease_expires_at is not None and run.lease_expires_at < now)


@transaction.atomic
def run_cancel(*, actor, run: AgentRun, reason: str = "") -> AgentRun:
    """Stop a run at the next step boundary. A queued or waiting run, or a running one between
    steps, is cancelled at once; a run in the middle of a step is marked and the executor cancels
    it when that step commits (its work is kept). Refuses finished runs (NotAllowed)."""
    actor = coerce_actor(actor)
    _check_actor(actor, run.tenant_id, "cancel runs")
    locked = _lock_run(run)
    if locked.is_finished:
        raise NotAllowed(f"Run R{locked.pk} is already {locked.get_status_display().lower()}; there is nothing "
                         f"to cancel.")
    now = timezone.now()
    if locked.status == RunStatus.RUNNING and not _lease_is_free(locked, now):
        if locked.cancel_requested_at:
            raise NotAllowed(f"Cancelling run R{locked.pk} was already requested; it stops when its current "
                             f"step ends.")
        locked.cancel_requested_at = now
        locked.version += 1
        locked.save()
        _audit(locked, actor=actor, action="runs.run.cancel_requested", payload={"reason": reason})
    else:
        was_running = locked.status == RunStatus.RUNNING
        locked.cancel_requested_at = now
        locked.cancel()
        locked.finished_at = now
        locked.error, locked.error_code = f"Cancelled by {actor.identifier}" + (f": {reason}" if reason else "."), \
            "cancelled"
        locked.lease_owner, locked.lease_expires_at = None, None
        locked.version += 1
        locked.save()
        _audit(locked, actor=actor, action="runs.run.cancelled", decision="cancelled", payload={"reason": reason})
        tenant_id = locked.tenant_id
        if was_running or locked.thread_id:

            transaction.on_commit(lambda: pump_admissions(tenant_id))
    run.refresh_from_db()
    return locked


@transaction.atomic
def run_resume(*, actor, run: AgentRun, budget: dict | None = None, enqueue: bool = True) -> AgentRun:
    """Continue a run from its last checkpoint.

    - waiting or failed: back to queued (a failed step is tried again as a new step; its failure
      stays recorded); `budget` may raise the limits that ended it;
    - running whose worker died (lease expired) or whose next step was lost: re-enqueued;
    - queued: re-enqueued (admission decides when it starts).
    Refuses completed and cancelled runs, and a running run whose lease is live (NotAllowed)."""
    actor = coerce_actor(actor)
    _check_actor(actor, run.tenant_id, "resume runs")
    locked = _lock_run(run)
    now = timezone.now()
    if locked.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        raise NotAllowed(f"Run R{locked.pk} is {locked.get_status_display().lower()}; fork it from a checkpoint "
                         f"to run again.")
    if locked.status == RunStatus.RUNNING and not _lease_is_free(locked, now):
        raise NotAllowed(f"Run R{locked.pk} is being executed by {locked.lease_owner} (lease until "
                         f"{locked.lease_expires_at:%H:%M:%S}); it resumes by itself if that worker dies.")
    previous = locked.status
    if budget:
        limits = _budget(budget, {name: getattr(locked, name) for name in BUDGET_FIELDS})
        for name, value in limits.items():
            setattr(locked, name, value)
    if locked.status in (RunStatus.WAITING, RunStatus.FAILED):
        if locked.status == RunStatus.FAILED and not locked.current_node:
            raise NotAllowed(f"Run R{locked.pk} failed before it had a node to run; start a new run.")
        locked.requeue()
        locked.queued_at = now
        locked.finished_at = None
        locked.wait_reason = ""
        locked.error, locked.error_code = "", ""
        locked.retry_counts = {}
        locked.cancel_requested_at = None
        locked.phase = "executing"
    locked.version += 1
    locked.save()
    _audit(locked, actor=actor, action="runs.run.resumed", payload={"from_status": previous,
                                                                     "next_sequence": locked.next_sequence})
    if enqueue:
        _enqueue_on_commit(locked.pk)
    run.refresh_from_db()
    return locked


@transaction.atomic
def run_fork(*, actor, run: AgentRun, from_sequence: int, provider: str | None = None, budget: dict | None = None,
             enqueue: bool = True) -> AgentRun:
    """Start a new run from the parent's checkpoint after step `from_sequence` (0 = the start).

    The fork reproduces the parent's steps 1..N: their Step rows, findings and artifacts are copied
    (each pointing at its original), and its checkpoints up to N are the parent's (same state
    hashes). From step N+1 on it executes afresh — on the case as it is now, with the given
    provider and budget — and diverges. Both runs stay inspectable. Tool effects are never copied.
    Refuses a checkpoint that does not exist, or one after which the parent had ended (NotAllowed)."""
    actor = coerce_actor(actor)
    _check_actor(actor, run.tenant_id, "fork runs")
    # Lock the parent (no key update: children may still reference it) so a retention purge
    # cannot delete the checkpoint between our read and the fork's foreign key to it.
    parent = AgentRun.objects.select_for_update(no_key=True).get(pk=run.pk)
    if parent.thread_id is not None:  # A conversation run writes into its thread exactly once
        raise NotAllowed(f"Run R{parent.pk} is a {parent.graph} run of thread {parent.thread_id}: conversation runs "
                         f"cannot be forked. Post the question again in the thread to get a new answer.")
    checkpoint, next_node = _fork_point(parent, from_sequence)
    definition = get_graph(parent.graph)
    limits = _budget(budget, {name: getattr(parent, name) for name in BUDGET_FIELDS})
    provider_name, provider_obj = _provider(provider or parent.provider_name)
    copied_steps = list(Step.objects.filter(run=parent, sequence__lte=from_sequence).order_by("sequence"))
    now = timezone.now()
    fork = AgentRun.objects.create(
        tenant_id=parent.tenant_id, case_id=parent.case_id, thread_id=None, graph=parent.graph,
        graph_version=definition.version, input=parent.input, current_node=next_node, **limits,
        next_sequence=from_sequence + 1, steps_used=len(copied_steps),
        tokens_used=sum(s.tokens for s in copied_steps),
        started_by=actor.identifier, started_by_user=actor.user if actor.is_user else None,
        provider_name=provider_name, model_name=getattr(provider_obj, "model", ""),
        prompt_versions=definition.prompt_versions, parent_run=parent, forked_from_checkpoint=checkpoint,
        queued_at=now, phase="executing" if from_sequence else "planning")
    _fork_copy_rows(parent, fork, copied_steps, from_sequence)
    # The fork must start from exactly the parent's state at N (both upgraded to the current schema).
    if state_at(fork)[0].hash() != state_at(parent, from_sequence)[0].hash():
        raise RuntimeError(f"Fork of R{parent.pk} at step {from_sequence} does not reproduce the parent's state.")
    _audit(fork, actor=actor, action="runs.run.forked",
           payload={"parent_run": parent.pk, "from_sequence": from_sequence, "state_hash": checkpoint.state_hash,
                    "provider": provider_name, "budget": limits})
    if enqueue:
        _enqueue_on_commit(fork.pk)
    return fork


def _fork_point(parent: AgentRun, from_sequence: int) -> tuple[Checkpoint, str]:
    """The parent's checkpoint after `from_sequence` and the node the fork starts at; NotAllowed
    naming the kept checkpoints when there is none, or when the parent ended at that step."""
    checkpoint = Checkpoint.objects.filter(run=parent, sequence=from_sequence).first()
    if checkpoint is None:
        kept = list(Checkpoint.objects.filter(run=parent).order_by("sequence").values_list("sequence", flat=True))
        if parent.checkpoints_purged_at and 0 <= from_sequence < parent.next_sequence:
            raise NotAllowed(
                f"The checkpoint after step {from_sequence} of run R{parent.pk} was purged on "
                f"{parent.checkpoints_purged_at:%Y-%m-%d} by the retention policy; fork from a kept one: "
                f"{', '.join(str(k) for k in kept) or 'none'}.")
        raise NotAllowed(f"Run R{parent.pk} has no checkpoint after step {from_sequence}; pick one of its "
                         f"completed steps (0 to {parent.next_sequence - 1}).")
    definition = get_graph(parent.graph)
    if from_sequence == 0:
        next_node = definition.start
    else:
        step = Step.objects.get(run=parent, sequence=from_sequence)
        if step.outcome != "goto":
            raise NotAllowed(f"Run R{parent.pk} ended at step {from_sequence} ({step.outcome}); fork from an "
                             f"earlier step.")
        next_node = step.next_node
    return checkpoint, next_node


def _fork_copy_rows(parent: AgentRun, fork: AgentRun, copied_steps: list[Step], from_sequence: int) -> None:
    """Copy the parent's steps 1..N, checkpoints, findings and artifacts into the fork, each pointing
    at its original (tool effects are never copied)."""
    step_map = {}
    for step in copied_steps:
        step_map[step.pk] = Step.objects.create(
            run=fork, sequence=step.sequence, node=step.node, attempt=step.attempt, status=step.status,
            outcome=step.outcome, next_node=step.next_node, summary=step.summary, error=step.error,
            worker_id=step.worker_id, tokens=step.tokens, started_at=step.started_at, finished_at=step.finished_at,
            duration_ms=step.duration_ms, copied_from=step)
    for row in Checkpoint.objects.filter(run=parent, sequence__lte=from_sequence).order_by("sequence"):
        Checkpoint.objects.create(run=fork, sequence=row.sequence, step=step_map.get(row.step_id),
                                  schema_version=row.schema_version, delta=row.delta, snapshot=row.snapshot,
                                  state_hash=row.state_hash, size_bytes=row.size_bytes)
    finding_map: dict[int, int] = {}
    for finding in Finding.objects.filter(run=parent, step__sequence__lte=from_sequence).order_by("id"):
        copy = Finding.objects.create(
            tenant_id=finding.tenant_id, case_id=finding.case_id, run=fork, step=step_map.get(finding.step_id),
            agent=finding.agent, type=finding.type, summary=finding.summary, evidence_refs=finding.evidence_refs,
            confidence=finding.confidence, contradicts_id=finding_map.get(finding.contradicts_id,
                                                                          finding.contradicts_id),
            data=finding.data, copied_from=finding)
        finding_map[finding.pk] = copy.pk
    for artifact in Artifact.objects.filter(run=parent, step__sequence__lte=from_sequence).order_by("id"):
        Artifact.objects.create(
            tenant_id=artifact.tenant_id, case_id=artifact.case_id, run=fork, step=step_map.get(artifact.step_id),
            kind=artifact.kind, content=artifact.content, content_hash=artifact.content_hash,
            source_refs=artifact.source_refs, schema_version=artifact.schema_version,
            produced_by=artifact.produced_by, copied_from=artifact)

