"""The write paths of the outbox: enqueue a task in the caller's transaction, relay pending rows to
the broker, record a worker's heartbeat.

    outbox_enqueue(task="cases.tasks.notice_dispatch_task", kwargs={"notice_id": 7, "actor_user_id": 3},
                   dedupe_key="notice-dispatch:7:0")

is the one call other apps make (inside their service's transaction). Everything else here is run
by the relay's callers: the on-commit hook, `outbox.tasks.outbox_relay_task` (beat), the worker's
heartbeat thread and its start-up (config/celery.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.module_loading import import_string

from config.celery import app
from core.outages import OutageLog
from outbox.models import BeatHeartbeat, DutyTurn, OutboxMessage, WorkerHeartbeat

logger = logging.getLogger(__name__)
AFTER_COMMIT_OUTAGE = OutageLog("outbox: publishing after commit")

# How a task is handed to the broker: by default Celery's send_task(name, kwargs=...). A task whose
# app has its own single enqueue point names it here (a function taking the row's kwargs), so the
# outbox goes through it too (and tests that observe that point keep observing everything).
PUBLISHERS: dict[str, str] = {
    "runs.tasks.run_step_task": "runs.tasks.enqueue_step",
    "cases.tasks.notice_dispatch_task": "cases.tasks.notice_dispatch_publish",
}

# A failed publish is retried after 2, 4, 8 seconds, then every 10: once the broker is back, a row
# waits at most this long (relay passes stop at the first broker error, so retrying costs one try).
MAX_BACKOFF_SECONDS = 10


class OutboxOutsideTransaction(RuntimeError):
    """outbox_enqueue was called in autocommit mode: the row would not share the change's fate."""


def outbox_enqueue(*, task: str, kwargs: dict | None = None, dedupe_key: str | None = None,
                   relay_on_commit: bool = True) -> OutboxMessage:
    """Record that `task` must be published with `kwargs`, in the CALLER's transaction.

    Must be called inside an atomic block (the service's own): the row commits or rolls back with
    the change that needs the task. After the commit, one best-effort publish is attempted at once
    (`relay_on_commit`); if the broker is down the row waits for the relay (beat, worker heartbeat,
    worker start-up), which retries with backoff until it is published. Delivery is at least once:
    the task must be idempotent (every task of this project is).

    `kwargs` must be JSON data. `dedupe_key`, when given, makes the call idempotent: a second call
    with the same key returns the first row (relayed or not) and adds nothing.
    Raises OutboxOutsideTransaction when called outside a transaction, TypeError on non-JSON kwargs."""
    if not transaction.get_connection().in_atomic_block:
        raise OutboxOutsideTransaction(
            "outbox_enqueue must be called inside the transaction of the change that needs the task "
            "(wrap the service in transaction.atomic).")
    json.dumps(kwargs or {})  # a TypeError here names the bad value before anything is written
    now = timezone.now()
    if dedupe_key:
        existing = OutboxMessage.objects.filter(dedupe_key=dedupe_key).first()
        if existing is not None:
            return existing
        try:
            with transaction.atomic():
                row = OutboxMessage.objects.create(task=task, kwargs=kwargs or {}, dedupe_key=dedupe_key,
                                                   available_at=now)
        except IntegrityError:
            # A concurrent transaction wrote the same intent first; it is the one.
            return OutboxMessage.objects.get(dedupe_key=dedupe_key)
    else:
        row = OutboxMessage.objects.create(task=task, kwargs=kwargs or {}, available_at=now)
    if relay_on_commit:
        row_id = row.pk
        transaction.on_commit(lambda: relay_after_commit(row_id), robust=True)
    return row


def relay_after_commit(row_id: int) -> None:
    """The on-commit publish: best effort. It never raises — the request that committed the change
    has succeeded whatever the broker says; the relay retries what is still pending. An unreachable
    broker is said once per outage (and its end with the count), not once per request."""
    try:
        report = outbox_relay(ids=[row_id])
    except Exception as exc:  # a broker or database error must not turn a committed request into a 500
        logger.warning("outbox: publishing O%s after commit failed (%s: %s); the relay will retry it", row_id,
                       type(exc).__name__, exc)
        return
    if report.outage is not None:
        AFTER_COMMIT_OUTAGE.failed(report.outage)
    elif report.published:
        AFTER_COMMIT_OUTAGE.succeeded()


@dataclass
class RelayReport:
    published: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)  # claimed by another relay, or already relayed
    # The broker's error when it could not be reached: the pass stopped there, the row waits. Not
    # logged per row; the caller says it once per outage (core.outages.OutageLog).
    outage: Exception | None = None

    def __str__(self) -> str:
        return f"published {len(self.published)}, failed {len(self.failed)}, skipped {len(self.skipped)}"


def publish(task: str, kwargs: dict) -> None:
    """Hand one task to the broker (through the app's enqueue point when it has one)."""
    path = PUBLISHERS.get(task)
    if path:
        import_string(path)(**kwargs)
        return
    app.send_task(task, kwargs=kwargs)


def outbox_relay(*, ids: Iterable[int] | None = None, limit: int | None = None, now=None) -> RelayReport:
    """Publish pending outbox rows (all due ones, or just `ids`) and mark each relayed.

    Each row is CLAIMED first with a compare-and-set (UPDATE ... WHERE relayed_at IS NULL AND
    available_at <= now, moving available_at forward by ARBITER_OUTBOX_CLAIM_SECONDS): of two relays
    that see the same row, exactly one updates it and publishes; the other skips it. After the
    publish the row is marked relayed; a failed publish records the error and makes the row due
    again after a backoff. Only a relay that dies between publishing and marking (or is slower
    than its claim) can publish a row twice — delivery is at least once and tasks are idempotent.
    Never holds a transaction open while talking to the broker."""
    now = now or timezone.now()
    due = OutboxMessage.objects.filter(relayed_at__isnull=True, available_at__lte=now)
    if ids is not None:
        due = due.filter(pk__in=list(ids))
    batch = limit or settings.ARBITER_OUTBOX_RELAY_BATCH
    rows = list(due.order_by("available_at", "id").values_list("id", "task", "kwargs", "attempts")[:batch])
    report = RelayReport()
    claim_until = now + timedelta(seconds=settings.ARBITER_OUTBOX_CLAIM_SECONDS)
    for row_id, task, kwargs, attempts in rows:
        claimed = OutboxMessage.objects.filter(pk=row_id, relayed_at__isnull=True, available_at__lte=now).update(
            available_at=claim_until, attempts=F("attempts") + 1)
        if claimed != 1:
            report.skipped.append(row_id)
            continue
        try:
            publish(task, kwargs)
        except Exception as exc:  # the broker is down or refused: the row stays pending
            backoff = min(2 ** (attempts + 1), MAX_BACKOFF_SECONDS)
            OutboxMessage.objects.filter(pk=row_id, relayed_at__isnull=True).update(
                available_at=timezone.now() + timedelta(seconds=backoff),
                last_error=f"{type(exc).__name__}: {exc}"[:2000])
            report.failed.append(row_id)
            if _broker_unreachable(exc):
                report.outage = exc
                break  # the next rows would fail the same way: leave them due for the next pass
            logger.warning("outbox: O%s (%s) not published: %s; retry in %ss", row_id, task, exc, backoff)
            continue
        OutboxMessage.objects.filter(pk=row_id, relayed_at__isnull=True).update(relayed_at=timezone.now(),
                                                                                last_error="")
        report.published.append(row_id)
    if report.published or report.failed:
        logger.info("outbox relay: %s", report)
    return report


def outbox_relay_or_raise() -> RelayReport:
    """outbox_relay for the loops that log an outage once (the worker's heartbeat thread, the beat
    task): the broker's error is raised when it could not be reached, for their OutageLog."""
    report = outbox_relay()
    if report.outage is not None:
        raise report.outage
    return report


def _broker_unreachable(exc: Exception) -> bool:
    from kombu.exceptions import OperationalError

    return isinstance(exc, (OperationalError, ConnectionError, TimeoutError))


def outbox_make_due(*, ids: Iterable[int]) -> int:
    """The admin's "relay now": make pending rows due at once (a claim in progress is left alone
    only if it is live: this moves available_at back, so the next relay takes them). Returns the
    number of rows made due. Relayed rows are not touched."""
    return OutboxMessage.objects.filter(pk__in=list(ids), relayed_at__isnull=True).update(
        available_at=timezone.now())


# --- worker heartbeats -----------------------------------------------------------------------

def worker_heartbeat_record(*, name: str, pid: int, starting: bool = False) -> None:
    """A worker says it is alive (called every ARBITER_WORKER_HEARTBEAT_SECONDS by its heartbeat
    thread, and at start-up). Idempotent; one row per worker name."""
    now = timezone.now()
    updated = WorkerHeartbeat.objects.filter(name=name).update(
        pid=pid, last_seen_at=now, stopped_at=None, **({"started_at": now} if starting else {}))
    if not updated:
        try:
            with transaction.atomic():
                WorkerHeartbeat.objects.create(name=name, pid=pid, started_at=now, last_seen_at=now)
        except IntegrityError:  # another thread of the same node created it: it is alive either way
            WorkerHeartbeat.objects.filter(name=name).update(last_seen_at=now, stopped_at=None)


def duty_turn_take(*, name: str, interval_seconds: int, holder: str, now=None) -> bool:
    """Take this interval's turn at a periodic duty; True when the caller should do it now.

    A compare-and-set (UPDATE ... WHERE due_at <= now, moving due_at one interval on): of the
    workers that ask at the same moment exactly one updates the row, so the duty runs once per
    interval whatever the number of workers. The first turn ever creates the row; a worker that
    loses that race to the unique name simply did not get the turn. A worker that dies while doing
    its duty costs one interval: the next turn is due by then."""
    now = now or timezone.now()
    next_due = now + timedelta(seconds=interval_seconds)
    if DutyTurn.objects.filter(name=name, due_at__lte=now).update(due_at=next_due, taken_by=holder[:255],
                                                                  taken_at=now):
        return True
    if DutyTurn.objects.filter(name=name).exists():
        return False
    try:
        with transaction.atomic():
            DutyTurn.objects.create(name=name, due_at=next_due, taken_by=holder[:255], taken_at=now)
    except IntegrityError:
        return False
    return True


def beat_heartbeat_record(*, name: str, pid: int) -> None:
    """Celery beat says it is alive (outbox.beat's scheduler, on its ticks). One row per beat."""
    now = timezone.now()
    if not BeatHeartbeat.objects.filter(name=name).update(pid=pid, last_seen_at=now):
        try:
            with transaction.atomic():
                BeatHeartbeat.objects.create(name=name, pid=pid, last_seen_at=now)
        except IntegrityError:  # created meanwhile by the same beat: it is alive either way
            BeatHeartbeat.objects.filter(name=name).update(pid=pid, last_seen_at=now)


def worker_heartbeat_stopped(*, name: str) -> None:
    """A worker shuts down cleanly: it is no longer counted as alive."""
    WorkerHeartbeat.objects.filter(name=name).update(stopped_at=timezone.now())
