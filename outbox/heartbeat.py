"""The worker's heartbeat thread (started from config/celery.py on worker_ready).

Beat-independent on purpose: every ARBITER_WORKER_HEARTBEAT_SECONDS the worker's main process
refreshes its WorkerHeartbeat row and relays due outbox rows, so a deployment without beat (or
with beat down) still shows live workers and still drains the outbox. A database or broker outage
is logged and survived: the next tick tries again."""

from __future__ import annotations

import logging
import os
import threading

from django.conf import settings
from django.db import close_old_connections, connections

logger = logging.getLogger(__name__)


class WorkerHeartbeatThread(threading.Thread):
    def __init__(self, name: str):
        super().__init__(name="arbiter-heartbeat", daemon=True)
        self.worker_name = name
        self.stopping = threading.Event()

    def tick(self, *, starting: bool = False) -> None:
        from outbox.services import outbox_relay, worker_heartbeat_record

        for what, call in (("heartbeat", lambda: worker_heartbeat_record(name=self.worker_name, pid=os.getpid(),
                                                                          starting=starting)),
                           ("outbox relay", outbox_relay)):
            try:
                call()
            except Exception:  # database or broker down: say so, drop the broken connection, go on
                logger.warning("worker %s: %s failed; retrying in %ss", self.worker_name, what,
                               settings.ARBITER_WORKER_HEARTBEAT_SECONDS, exc_info=True)
                connections.close_all()

    def run(self) -> None:
        try:
            while not self.stopping.wait(settings.ARBITER_WORKER_HEARTBEAT_SECONDS):
                close_old_connections()
                self.tick()
        finally:
            connections.close_all()

    def stop(self) -> None:
        self.stopping.set()
