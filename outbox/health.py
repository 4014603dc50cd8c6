"""The outbox app's readiness checks for /readyz (ops.health): a worker is alive, the outbox is
being relayed, and (degrading only) beat is alive. Registered from OutboxConfig.ready under the hook names ops.health defines."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from ops import metrics
from outbox.models import BeatHeartbeat, OutboxMessage, WorkerHeartbeat


def check_worker_heartbeat() -> str | None:
    """Ready when at least one worker that has not stopped sent a heartbeat within
    ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS; otherwise says when one was last seen."""

    now = timezone.now()
    timeout = settings.ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS
    alive = WorkerHeartbeat.objects.filter(stopped_at__isnull=True, last_seen_at__gte=now - timedelta(seconds=timeout))
    if alive.exists():
        return None
    last = WorkerHeartbeat.objects.order_by("-last_seen_at").values_list("last_seen_at", flat=True).first()
    if last is None:
        return "no worker has ever sent a heartbeat: start one (celery -A config worker)"
    return f"no worker has been seen for {int((now - last).total_seconds())} s (since {last.isoformat()})"


def check_outbox_lag() -> str | None:
    """Ready while the oldest unrelayed outbox row is younger than ARBITER_OUTBOX_DRIFT_AFTER_SECONDS.
    Also sets the outbox lag gauge of the metrics (0 when nothing waits)."""

    now = timezone.now()
    oldest = (OutboxMessage.objects.filter(relayed_at__isnull=True).order_by("created_at")
              .values_list("created_at", flat=True).first())
    lag = (now - oldest).total_seconds() if oldest else 0.0
    metrics.outbox_lag(lag)
    limit = settings.ARBITER_OUTBOX_DRIFT_AFTER_SECONDS
    if lag > limit:
        return f"the oldest unrelayed outbox row waits for {int(lag)} s (over {limit} s): is the broker reachable?"
    return None


def beat_missing(now=None, *, never_seen_is_missing: bool = True) -> str | None:
    """Why beat counts as missing (its heartbeat older than ARBITER_BEAT_MISSING_AFTER_SECONDS, or
    never seen unless `never_seen_is_missing` is False), or None while it lives. Also sets the beat
    heartbeat age gauge of the metrics."""

    now = now or timezone.now()
    last = BeatHeartbeat.objects.order_by("-last_seen_at").values_list("last_seen_at", flat=True).first()
    limit = settings.ARBITER_BEAT_MISSING_AFTER_SECONDS
    if last is None:
        metrics.beat_heartbeat_age(-1)
        if not never_seen_is_missing:
            return None
        return ("celery beat has never sent a heartbeat: start it (celery -A config beat); runs still recover "
                "through the workers, but hourly and daily jobs (deadlines, anchors, purges) do not run")
    age = max((now - last).total_seconds(), 0.0)
    metrics.beat_heartbeat_age(age)
    if age > limit:
        return (f"celery beat has not been seen for {int(age)} s (over {limit} s, since {last.isoformat()}): "
                f"runs still recover through the workers, but hourly and daily jobs wait until it is back")
    return None


def check_beat_heartbeat() -> str | None:
    """Degrades /readyz (200, status `degraded`) while beat is missing; see beat_missing."""
    return beat_missing()
