"""Thin Celery tasks over runs.executor (STYLE: tasks take ids, import lazily, call the service).

Delivery is at-least-once (acks_late, prefetch 1): a task may run twice, late, or concurrently
with a copy of itself. run_step's lease compare-and-set and `expected_sequence` make every extra
delivery a no-op, so nothing here needs to be careful about that."""

from __future__ import annotations

import os
import socket

from celery import shared_task
from django.conf import settings


def _worker_id(task) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{task.request.id or 'local'}"


@shared_task(bind=True, acks_late=True, ignore_result=True,
             soft_time_limit=settings.ARBITER_RUN_STEP_SOFT_TIME_LIMIT,
             time_limit=settings.ARBITER_RUN_STEP_TIME_LIMIT)
def run_step_task(self, run_id: int, expected_sequence: int | None = None) -> str:
    from runs.executor import run_step

    outcome = run_step(run_id=run_id, worker_id=_worker_id(self), expected_sequence=expected_sequence)
    return outcome.action


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def reap_expired_leases_task(self) -> int:
    from runs.executor import lease_reap_expired

    return len(lease_reap_expired())


def enqueue_step(run_id: int, *, expected_sequence: int | None = None, countdown: int = 0) -> None:
    """The one place the runs app sends a step to the broker (tests replace it to observe enqueues).
    Call it from transaction.on_commit only."""
    run_step_task.apply_async(kwargs={"run_id": run_id, "expected_sequence": expected_sequence},
                              countdown=countdown or None)


# A purge of a large backlog may take a while; it is safe to kill (each tenant's purge is one
# transaction) and to run twice (the second finds nothing), so the limits are generous.
@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=1800, time_limit=1860)
def retention_purge_task(self) -> dict[str, int]:
    from runs.retention import retention_purge

    return retention_purge()
