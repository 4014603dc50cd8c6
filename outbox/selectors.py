"""Reads of the outbox app: the workers' liveness and the outbox backlog."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Q
from django.utils import timezone

from outbox.models import OutboxMessage, WorkerHeartbeat


@dataclass(frozen=True)
class WorkerStatus:
    alive: int  # workers seen within ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS and not stopped
    last_seen_at: datetime | None  # the most recent heartbeat of any worker (None: never seen)

    @property
    def message(self) -> str:
        """What a page or a command says when nobody will execute queued work ("" when a worker lives)."""
        if self.alive:
            return ""
        if self.last_seen_at is None:
            return "No worker has been seen yet: the work waits until a Celery worker starts."
        return (f"No worker has been seen since {self.last_seen_at:%Y-%m-%d %H:%M:%S} UTC: the work waits "
                f"until a Celery worker starts.")


def worker_status(*, now=None) -> WorkerStatus:
    """Whether any Celery worker is alive (not tenant-scoped: workers serve every tenant and say
    nothing about any tenant's data)."""
    now = now or timezone.now()
    horizon = now - timedelta(seconds=settings.ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS)
    found = WorkerHeartbeat.objects.aggregate(  # one query: pages include this on every render
        last=Max("last_seen_at"), alive=Count("pk", filter=Q(stopped_at__isnull=True, last_seen_at__gte=horizon)))
    return WorkerStatus(alive=found["alive"] or 0, last_seen_at=found["last"])


def outbox_pending(*, older_than_seconds: int | None = None, now=None):
    """Rows not yet relayed (optionally only those created more than `older_than_seconds` ago)."""
    rows = OutboxMessage.objects.filter(relayed_at__isnull=True)
    if older_than_seconds is not None:
        rows = rows.filter(created_at__lt=(now or timezone.now()) - timedelta(seconds=older_than_seconds))
    return rows.order_by("created_at", "id")
