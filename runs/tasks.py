"""Thin Celery tasks over runs.executor (they take ids and call the service).

Delivery is at-least-once (acks_late, prefetch 1): a task may run twice, late, or concurrently
with a copy of itself. run_step's lease compare-and-set and `expected_sequence` make every extra
delivery a no-op, so nothing here needs to be careful about that.

run_step_task retries itself on database and broker errors (an outage delays a run, it does not
drop the message), with exponential backoff capped at ARBITER_TASK_RETRY_BACKOFF_MAX_SECONDS; and
when the run is leased by a worker that looks dead (its heartbeat is going stale), it retries once
the heartbeat has timed out instead of giving the delivery up."""

from __future__ import annotations

import os
import socket

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from kombu.exceptions import OperationalError as BrokerError

from runs import executor
from runs.retention import retention_purge

# Transient infrastructure errors: the database or the broker is away for a moment.
TRANSIENT_ERRORS = (OperationalError, InterfaceError, BrokerError, ConnectionError)


def _worker_id(task) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{task.request.id or 'local'}"


@shared_task(bind=True, acks_late=True, ignore_result=True,
             soft_time_limit=settings.ARBITER_RUN_STEP_SOFT_TIME_LIMIT,
             time_limit=settings.ARBITER_RUN_STEP_TIME_LIMIT,
             autoretry_for=TRANSIENT_ERRORS, retry_backoff=1,
             retry_backoff_max=settings.ARBITER_TASK_RETRY_BACKOFF_MAX_SECONDS, retry_jitter=False,
             max_retries=settings.ARBITER_TASK_MAX_RETRIES)
def run_step_task(self, run_id: int, expected_sequence: int | None = None) -> str:
    """Execute the run's steps for one time slice (runs.executor.run_steps): one commit per step,
    the lease kept between them, the next step handed to the broker at the end of the slice."""
    from django.db import close_old_connections, connection

    if not connection.in_atomic_block:  # run eagerly inside a transaction (tests), the connection is the caller's
        close_old_connections()  # a connection broken by an outage is replaced, not reused
    outcome = executor.run_steps(run_id=run_id, worker_id=_worker_id(self), expected_sequence=expected_sequence)
    if outcome.action == "busy" and outcome.retry_after:
        raise self.retry(countdown=outcome.retry_after, max_retries=settings.ARBITER_TASK_MAX_RETRIES)
    return outcome.action


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def reap_expired_leases_task(self) -> int:
    return len(executor.lease_reap_expired())


def enqueue_step(run_id: int, *, expected_sequence: int | None = None, countdown: int = 0) -> None:
    """The one place the runs app sends a step to the broker (tests replace it to observe enqueues).
    Call it from transaction.on_commit only."""
    run_step_task.apply_async(kwargs={"run_id": run_id, "expected_sequence": expected_sequence},
                              countdown=countdown or None)


# A purge of a large backlog may take a while; it is safe to kill (each tenant's purge is one
# transaction) and to run twice (the second finds nothing), so the limits are generous.
@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=1800, time_limit=1860)
def retention_purge_task(self) -> dict[str, int]:
    return retention_purge()
