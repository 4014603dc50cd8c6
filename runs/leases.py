"""Run leases, heartbeats and the reaper (docs/architecture.md, "The run engine"; ADR 0010).

A lease on the run row says which worker executes its steps. It is taken by compare-and-set
(`lease_claim`), kept across a worker's consecutive steps (each step's commit renews it with the
same conditional UPDATE that checks it), and renewed while a long step runs by a heartbeat thread
(`heartbeat_scope`). A worker is considered dead when its heartbeat is older than
ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS: another worker may then claim the run, and the reaper
re-enqueues it — long before the lease itself (ARBITER_RUN_LEASE_SECONDS) would expire.

Between steps a run with no lease carries in `lease_expires_at` the deadline by which its next
step should have started (hand-off time + ARBITER_RUN_REENQUEUE_AFTER_SECONDS): the run row is the
durable record that a step is due — the step's outbox — and the reaper re-enqueues a run past that
deadline, so a lost broker message delays a run, it never strands it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import F, Q
from django.utils import timezone

from runs.models import AgentRun, RunStatus

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker took this run's lease (ours expired); this worker must stop without committing."""


def lease_seconds() -> int:
    return settings.ARBITER_RUN_LEASE_SECONDS


def handoff_deadline(now: datetime, *, countdown: int = 0) -> datetime:
    """For a run released between steps: when the reaper should consider its next step lost."""
    return now + timedelta(seconds=countdown + settings.ARBITER_RUN_REENQUEUE_AFTER_SECONDS)


def lease_is_fresh(run: AgentRun, worker_id: str, now: datetime) -> bool:
    """Whether `worker_id` holds the run's lease with enough of it left that the next step need
    not claim it: the heartbeat is younger than one heartbeat interval and more than a quarter of
    the lease remains. Then the step's commit (which re-checks it, and renews it once half of it
    has passed: `lease_renewal_due`) is the only write."""
    if run.lease_owner != worker_id or run.status != RunStatus.RUNNING:
        return False
    if run.heartbeat_at is None or run.lease_expires_at is None:
        return False
    return (now - run.heartbeat_at < timedelta(seconds=settings.ARBITER_RUN_HEARTBEAT_SECONDS)
            and run.lease_expires_at - now > timedelta(seconds=lease_seconds() / 4))


def lease_renewal_due(run: AgentRun, now: datetime) -> bool:
    """Whether a commit that keeps the lease must also push its expiry: only once half the lease
    has passed. In between, a step's UPDATE leaves `lease_expires_at` (an indexed column) alone,
    so PostgreSQL can make it a HOT update — no index entries, less WAL."""
    return run.lease_expires_at is None or run.lease_expires_at - now < timedelta(seconds=lease_seconds() / 2)


def _claimable(worker_id: str, now: datetime) -> Q:
    stale = now - timedelta(seconds=settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS)
    return (Q(lease_owner__isnull=True) | Q(lease_owner=worker_id) | Q(lease_expires_at__lt=now)
            | Q(heartbeat_at__lt=stale))


def lease_claim(run: AgentRun, worker_id: str) -> bool:
    """Compare-and-set: take (or renew) the run's lease if it is free, ours, expired, or held by a
    worker whose heartbeat timed out — and only for the step `run.next_sequence` read before. On
    success the in-memory `run` carries the new lease (its version is bumped, so a later step of
    this worker can tell that the row was claimed)."""
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds())
    claimed = (AgentRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, next_sequence=run.next_sequence)
               .filter(_claimable(worker_id, now))
               .update(lease_owner=worker_id, lease_expires_at=expires, heartbeat_at=now, version=F("version") + 1))
    if claimed != 1:
        return False
    run.lease_owner, run.lease_expires_at, run.heartbeat_at = worker_id, expires, now
    run.version += 1
    return True


def seconds_until_claimable(run: AgentRun, now: datetime) -> int:
    """For a delivery that found the run busy: 0 when the holder looks alive (its heartbeat is
    recent), else how long until its heartbeat times out and the run can be claimed."""
    if run.lease_owner is None or run.heartbeat_at is None:
        return 0
    silent = (now - run.heartbeat_at).total_seconds()
    if silent < 2 * settings.ARBITER_RUN_HEARTBEAT_SECONDS:
        return 0
    return max(1, math.ceil(settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS - silent) + 1)


def lease_renew(run_id: int, worker_id: str) -> None:
    """Renew the lease and heartbeat; raise LeaseLost when this worker no longer holds it."""
    now = timezone.now()
    renewed = AgentRun.objects.filter(pk=run_id, lease_owner=worker_id, status=RunStatus.RUNNING).update(
        lease_expires_at=now + timedelta(seconds=lease_seconds()), heartbeat_at=now)
    if not renewed:
        raise LeaseLost(f"run {run_id}: lease lost by {worker_id}")


def lease_release(run_id: int, worker_id: str) -> None:
    """Give the lease back between steps (a driver that stops stepping a run it still holds)."""
    AgentRun.objects.filter(pk=run_id, lease_owner=worker_id).update(
        lease_owner=None, lease_expires_at=handoff_deadline(timezone.now()))


def throttled_heartbeat(run_id: int, worker_id: str):
    """The heartbeat a node calls (around model and tool calls): renews at most once per half
    heartbeat interval — the commit re-checks the lease anyway, so a skipped renewal costs nothing
    but a later discovery of a lost lease."""
    last = [time.monotonic()]

    def beat() -> None:
        now = time.monotonic()
        if now - last[0] >= settings.ARBITER_RUN_HEARTBEAT_SECONDS / 2:
            lease_renew(run_id, worker_id)
            last[0] = now

    return beat


# --- the heartbeat thread -------------------------------------------------------------------------

class _Heartbeats:
    """One daemon thread per process renews the heartbeat of every step running longer than a
    heartbeat interval (a slow model call), on its own database connection. Short steps never
    wake it: their commit is their heartbeat.

    The interval is read by the thread that registers a step, and kept with it: the heartbeat thread
    itself reads no setting while it waits. Django's settings object is not safe to read from one
    thread while another changes it (an override in a test replaces its wrapped object, and a read in
    between finds none), and this thread outlives every step it beats for."""

    IDLE_WAIT = 0.25  # seconds between looks when no step is registered (the shortest wait with one)

    def __init__(self):
        self._lock = threading.Lock()
        # token -> [run_id, worker_id, last renewal (monotonic), interval (s)]
        self._active: dict[int, list] = {}
        self._next = 0
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def register(self, run_id: int, worker_id: str) -> int:
        interval = float(settings.ARBITER_RUN_HEARTBEAT_SECONDS)
        with self._lock:
            self._next += 1
            self._active[self._next] = [run_id, worker_id, time.monotonic(), interval]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="run-heartbeats", daemon=True)
                self._thread.start()
            return self._next

    def unregister(self, token: int) -> None:
        with self._lock:
            self._active.pop(token, None)

    def _wait_seconds(self) -> float:
        with self._lock:
            intervals = [entry[3] for entry in self._active.values()]
        return max(min(intervals) / 4, 0.25) if intervals else self.IDLE_WAIT

    def _due(self) -> list[tuple[int, int, str, float]]:
        now = time.monotonic()
        with self._lock:
            return [(token, run_id, worker_id, interval)
                    for token, (run_id, worker_id, last, interval) in self._active.items() if now - last >= interval]

    def _loop(self) -> None:
        while True:
            self._wake.wait(self._wait_seconds())
            for token, run_id, worker_id, interval in self._due():
                try:
                    lease_renew(run_id, worker_id)
                except LeaseLost:
                    # Renewing again cannot win the lease back, and the step's commit finds out on its
                    # own: one line, then no more beats for this step (`evaluate`, whose runs no other
                    # connection can see, logged this every interval of every long model call).
                    logger.warning("heartbeat: run %s is no longer leased by %s; no more heartbeats for this "
                                   "step (its commit will be refused)", run_id, worker_id)
                    self.unregister(token)
                    continue
                except DatabaseError as exc:  # busy (SQLite's one writer) or away: the step finds out at its commit
                    logger.warning("heartbeat for run %s not written (%s); the next try follows in %s s", run_id,
                                   str(exc).splitlines()[0] if str(exc) else type(exc).__name__, interval)
                    connection.close()
                except Exception:
                    logger.exception("heartbeat for run %s failed", run_id)
                    connection.close()
                with self._lock:
                    if token in self._active:
                        self._active[token][2] = time.monotonic()


_HEARTBEATS = _Heartbeats()


@contextmanager
def heartbeat_scope(run_id: int, worker_id: str):
    """While the block runs (a node's execution), the run's heartbeat is renewed every
    ARBITER_RUN_HEARTBEAT_SECONDS by the heartbeat thread."""
    token = _HEARTBEATS.register(run_id, worker_id)
    try:
        yield
    finally:
        _HEARTBEATS.unregister(token)


# --- the reaper -------------------------------------------------------------------------------------

def runs_to_reap(now: datetime):
    """Running runs whose worker is gone (lease expired, or heartbeat timed out) or whose next step
    is overdue (no lease, hand-off deadline passed: the message was lost)."""
    stale = now - timedelta(seconds=settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS)
    return (AgentRun.objects.filter(status=RunStatus.RUNNING)
            .filter(Q(lease_expires_at__lt=now) | Q(lease_owner__isnull=False, heartbeat_at__lt=stale)))
