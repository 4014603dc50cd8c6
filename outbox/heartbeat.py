"""The worker's heartbeat thread (started from config/celery.py on worker_ready).

Beat-independent on purpose: every ARBITER_WORKER_HEARTBEAT_SECONDS the worker's main process
refreshes its WorkerHeartbeat row and relays due outbox rows, and on every tick it offers to do
the periodic duties of ARBITER_WORKER_DUTIES (reaping expired run leases ...): each duty is done by
one worker per interval, whichever takes the turn first (outbox.services.duty_turn_take). So a
deployment without beat, or with beat down, still shows live workers, still drains the outbox and
still resumes the runs of a dead worker, as long as one worker lives.

A database or broker outage is survived: the next tick tries again, and it is logged once when it
starts and once when it ends (core.outages.OutageLog), not as a traceback per tick."""

from __future__ import annotations

import functools
import logging
import os
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connections
from django.utils.module_loading import import_string

from core.outages import OutageLog, outage_kind
from outbox import services

logger = logging.getLogger(__name__)


def tick_seconds() -> float:
    """How often the thread wakes: often enough for the most frequent duty and the heartbeat."""
    intervals = [settings.ARBITER_WORKER_HEARTBEAT_SECONDS,
                 *(interval for _, interval in settings.ARBITER_WORKER_DUTIES.values())]
    return float(max(min(intervals), 1))


class WorkerHeartbeatThread(threading.Thread):
    def __init__(self, name: str):
        super().__init__(name="arbiter-heartbeat", daemon=True)
        self.worker_name = name
        self.stopping = threading.Event()
        self.last_heartbeat = 0.0
        self.outages: dict[str, OutageLog] = {}

    def _attempt(self, what: str, call) -> None:
        try:
            call()
        except Exception as exc:  # database or broker down: say so once, drop the broken connection, go on
            if outage_kind(exc) is None:
                logger.exception("worker %s: %s failed", self.worker_name, what)
            else:
                self._outage(what).failed(exc)
            connections.close_all()
        else:
            self._outage(what).succeeded()

    def _outage(self, what: str) -> OutageLog:
        return self.outages.setdefault(what, OutageLog(f"worker {self.worker_name}: {what}"))

    def tick(self, *, starting: bool = False) -> None:
        if starting or time.monotonic() - self.last_heartbeat >= settings.ARBITER_WORKER_HEARTBEAT_SECONDS:
            self.last_heartbeat = time.monotonic()
            self._attempt("heartbeat", lambda: services.worker_heartbeat_record(name=self.worker_name, pid=os.getpid(),
                                                                                starting=starting))
            self._attempt("outbox relay", services.outbox_relay_or_raise)
        for duty, (path, interval) in settings.ARBITER_WORKER_DUTIES.items():
            if self.stopping.is_set():
                return
            self._attempt(duty, functools.partial(self._do_duty, duty, path, interval))

    def _do_duty(self, duty: str, path: str, interval: int) -> None:
        if services.duty_turn_take(name=duty, interval_seconds=interval, holder=self.worker_name):
            import_string(path)()

    def run(self) -> None:
        try:
            while not self.stopping.wait(tick_seconds()):
                close_old_connections()
                self.tick()
        finally:
            connections.close_all()

    def stop(self, timeout: float = 0) -> None:
        """Ask the thread to stop; with a timeout, wait that long for its current tick to end."""
        self.stopping.set()
        if timeout and self.is_alive():
            self.join(timeout)
