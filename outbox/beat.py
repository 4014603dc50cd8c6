"""Celery beat's scheduler with a heartbeat (CELERY_BEAT_SCHEDULER points here).

Beat is no longer needed for recovery (every worker reaps expired leases and relays the outbox),
but it still runs the hourly and daily jobs; a beat that died must be visible. On its ticks,
at most every ARBITER_BEAT_HEARTBEAT_SECONDS, this scheduler refreshes beat's BeatHeartbeat row;
/readyz reports `degraded`, drift_report lists it and arbiter_beat_heartbeat_age_seconds grows
once the row is older than ARBITER_BEAT_MISSING_AFTER_SECONDS. A database outage costs beat
nothing: it is logged once (core.outages.OutageLog) and the next tick tries again. So does a
broker outage: a periodic task beat cannot send is one warning when the outage starts and one line
with the count when sending works again, not Celery's "Message Error" with a stack and a
traceback for every due entry on every tick; the entry is sent at its next due time, as before."""

from __future__ import annotations

import logging
import os
import socket
import time

from celery.beat import PersistentScheduler, SchedulingError
from django.conf import settings
from django.db import close_old_connections, connections

from core.outages import BrokerConnectionLogFilter, OutageLog, outage_kind
from outbox.services import beat_heartbeat_record

# Beat's own lines while the broker is down: "beat: Connection error: … Trying again in 4.0
# seconds..." (an ERROR per attempt to connect its producer) and, once connected, "Message Error"
# with a stack per due entry (below, in apply_async). One outage log for both.
BROKER_LOG = BrokerConnectionLogFilter("beat: the broker", lines=("beat: Connection error",))
logging.getLogger("celery.beat").addFilter(BROKER_LOG)


class HeartbeatScheduler(PersistentScheduler):
    def __init__(self, *args, **kwargs):
        self.beat_name = f"beat@{socket.gethostname()}"
        self.last_heartbeat = 0.0
        self.outage = OutageLog(f"{self.beat_name}: heartbeat")
        self.broker_outage = BROKER_LOG.outage
        super().__init__(*args, **kwargs)

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        try:
            result = super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        except SchedulingError as exc:
            cause = exc.__cause__ or exc.__context__  # Celery re-raises the broker's error as this
            if outage_kind(cause) is None:
                raise
            self.broker_outage.failed(cause)
            return None
        self.broker_outage.succeeded()
        return result

    def tick(self, *args, **kwargs):
        interval = settings.ARBITER_BEAT_HEARTBEAT_SECONDS
        if time.monotonic() - self.last_heartbeat >= interval:
            self.last_heartbeat = time.monotonic()
            self.record_heartbeat()
        # Wake at least once per heartbeat interval, whatever the schedule's next entry.
        return min(super().tick(*args, **kwargs), interval)

    def record_heartbeat(self) -> None:
        close_old_connections()
        try:
            beat_heartbeat_record(name=self.beat_name, pid=os.getpid())
        except Exception as exc:
            if outage_kind(exc) is None:
                raise
            self.outage.failed(exc)
            connections.close_all()
        else:
            self.outage.succeeded()
