"""Reads of execution state, always scoped to the user's tenant (another tenant's run is NotFound)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from cases.models import Notice, Proposal
from core.errors import NotFound
from runs.models import AgentRun, MemoryRecord, MemoryStatus, ModelCall, RunStatus, Step, StepStatus
from runs.retention import checkpoint_purged_check
from runs.state import RunState
from runs.state_load import state_at


def _tenant_id(user) -> int | None:
    return getattr(user, "tenant_id", None)


def run_list_for_user(*, user, case=None, status: str | None = None, thread_id: int | None = None) -> QuerySet[AgentRun]:
    qs = AgentRun.objects.filter(tenant_id=_tenant_id(user)).select_related("case")
    if case is not None:
        qs = qs.filter(case=case)
    if status:
        qs = qs.filter(status=status)
    if thread_id is not None:
        qs = qs.filter(thread_id=thread_id)
    return qs


def run_get_for_user(*, user, pk: int) -> AgentRun:
    try:
        return AgentRun.objects.select_related("case", "parent_run").get(tenant_id=_tenant_id(user), pk=pk)
    except (AgentRun.DoesNotExist, ValueError):
        raise NotFound("No such run.") from None


def run_queue_position(*, run: AgentRun) -> int | None:
    """Where a queued run stands in its tenant's FIFO queue (1 = next to start); None once it left
    the queue. Admission may still hold it back for its thread's earlier run or the tenant cap."""
    if run.status != RunStatus.QUEUED:
        return None
    ahead = AgentRun.objects.filter(tenant_id=run.tenant_id, status=RunStatus.QUEUED).filter(
        Q(queued_at__lt=run.queued_at) | Q(queued_at=run.queued_at, id__lt=run.pk)).count()
    return ahead + 1


def run_queue_facts(*, run: AgentRun) -> dict:
    """Where a run stands, for the UI and the API alike: its queue position while queued (1 = next),
    how many of its tenant's runs are running, the tenant's cap, and whether the cap is why it
    waits. Two small queries, and none for a run that left the queue."""
    cap = settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS
    if run.status != RunStatus.QUEUED:
        return {"position": None, "cap": cap, "running": None, "cap_reached": False}
    running = AgentRun.objects.filter(tenant_id=run.tenant_id, status=RunStatus.RUNNING).count()
    return {"position": run_queue_position(run=run), "cap": cap, "running": running, "cap_reached": running >= cap}


def thread_pending_runs(*, thread_id: int) -> QuerySet[AgentRun]:
    """The thread's runs that have not finished (a reply is pending while any exists), oldest first."""
    return AgentRun.objects.filter(thread_id=thread_id, status__in=RunStatus.unfinished()).order_by("id")


def run_steps(*, run: AgentRun) -> QuerySet[Step]:
    return Step.objects.filter(run=run).order_by("sequence")


COMPLETED_NODES = "completed_step_nodes"


def with_completed_nodes(runs: QuerySet[AgentRun]) -> QuerySet[AgentRun]:
    """`runs` with each run's completed steps' nodes fetched in one query for the lot (for
    run_completed_nodes; a page of runs, not one query per run)."""
    return runs.prefetch_related(Prefetch(
        "steps", to_attr=COMPLETED_NODES,
        queryset=Step.objects.filter(status=StepStatus.COMPLETED).order_by("sequence").only("run_id", "node")))


def run_completed_nodes(*, run: AgentRun) -> list[str]:
    """The node of each of the run's completed steps, in order (a fork's copied steps included)."""
    rows = getattr(run, COMPLETED_NODES, None)
    if rows is None:
        return list(Step.objects.filter(run=run, status=StepStatus.COMPLETED).order_by("sequence")
                    .values_list("node", flat=True))
    return [step.node for step in rows]


def run_model_calls_at(*, run: AgentRun, sequence: int) -> QuerySet[ModelCall]:
    """What the agent saw at step `sequence`: the exact messages, context and source refs."""
    return ModelCall.objects.filter(run=run, sequence=sequence).order_by("attempt", "id")


def run_state_at(*, run: AgentRun, sequence: int | None = None, whole: bool = False) -> RunState:
    """The run's state after step `sequence` (default: the latest). Raises CheckpointPurged (a
    NotFound saying when and why) when retention removed that checkpoint, rather than showing an
    earlier state in its place (runs.retention). `whole`: read the append-only fields' items now
    (for a page that shows them all) instead of when first read (runs.state_lists)."""
    try:
        state, loaded = state_at(run, sequence, lazy=not whole)
    except LookupError:
        if sequence is None:
            raise
        checkpoint_purged_check(run=run, sequence=sequence, loaded=None)
        raise
    if sequence is not None and loaded < sequence:
        checkpoint_purged_check(run=run, sequence=sequence, loaded=loaded)
    return state


def run_outcome(*, run: AgentRun) -> dict:
    """What a run produced: steps, findings, artifacts, proposals and notices (manage.py analyze)."""
    run_key = str(run.pk)
    return {
        "run": run,
        "steps": list(run.steps.order_by("sequence")),
        "findings": list(run.findings.order_by("id")),
        "artifacts": list(run.artifacts.order_by("id")),
        "proposals": list(Proposal.objects.filter(tenant_id=run.tenant_id, run_id=run_key).order_by("id")),
        "notices": list(Notice.objects.filter(tenant_id=run.tenant_id, run_id=run_key).order_by("id")),
        "tool_calls": list(run.tool_calls.order_by("id")),
    }


def memory_list_for_user(*, user, status: str | None = None, subject: str | None = None) -> QuerySet[MemoryRecord]:
    qs = MemoryRecord.objects.filter(tenant_id=_tenant_id(user))
    if status:
        qs = qs.filter(status=status)
    if subject:
        qs = qs.filter(subject=subject)
    return qs


def memory_active_for(*, tenant_id: int, subjects: list[str]) -> QuerySet[MemoryRecord]:
    return MemoryRecord.objects.filter(tenant_id=tenant_id, status=MemoryStatus.ACTIVE, subject__in=subjects,
                                       expires_at__gt=timezone.now())
