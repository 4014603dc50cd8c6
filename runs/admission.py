"""Admission of queued runs (ADR 0002 §7), split from runs.executor (which re-exports these names):
queued -> running under the tenant's row lock, FIFO, capped per tenant, never before an earlier
unfinished run of the same thread."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Tenant
from core.actors import Actor
from runs.leases import lease_seconds
from runs.models import AgentRun, RunStatus
from runs.run_events import audit_run_event, enqueue_next_step


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


def admit_run(run_id: int, worker_id: str) -> tuple[bool, int | None]:
    """queued -> running if the run may start now; `worker_id` (the admitting worker, which runs
    the next step) then holds the lease: no separate claim, no second commit.

    Returns (running, version): running is whether the run is running now (admitted here or by a
    concurrent delivery before); version is the run row's version this call wrote when it admitted
    the run for the first time (`started_at` was unset: no step of it was ever attempted, so none
    can have left tool calls behind) — else None. A run admitted again (resumed after waiting or
    failing) may have a dead attempt's tool calls at its next step: None."""
    with transaction.atomic():
        run = AgentRun.objects.filter(pk=run_id).values("tenant_id").first()
        if run is None:
            return False, None
        # Lock order: tenant, then run. Admissions of one tenant queue here so the cap holds.
        # FOR NO KEY UPDATE, not FOR UPDATE: inserting a row that references the tenant (every
        # audit event does) takes FOR KEY SHARE on it, which FOR UPDATE would block — a worker
        # committing a step (holding its run row) would then wait for us while we wait for its run
        # row: a deadlock. NO KEY UPDATE still excludes the other admitters.
        Tenant.objects.select_for_update(no_key=True).get(pk=run["tenant_id"])
        locked = AgentRun.objects.select_for_update(no_key=True).get(pk=run_id)
        if locked.status != RunStatus.QUEUED:
            return locked.status == RunStatus.RUNNING, None
        if run_id not in admission_order(locked.tenant_id):
            return False, None
        now = timezone.now()
        first = locked.started_at is None
        locked.admit()
        locked.started_at = locked.started_at or now
        locked.lease_owner, locked.heartbeat_at = worker_id, now
        locked.lease_expires_at = now + timedelta(seconds=lease_seconds())
        locked.version += 1
        locked.save()
        audit_run_event(locked, action="runs.run.admitted", actor_type=Actor.SYSTEM, actor_id="system:run-executor",
               payload={"queued_at": locked.queued_at.isoformat()})
    return True, (locked.version if first else None)


def pump_admissions(tenant_id: int) -> None:
    """Kick the queued runs that may start now (after a run left `running`)."""
    for run_id in admission_order(tenant_id):
        enqueue_next_step(run_id)


