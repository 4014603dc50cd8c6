"""The transactional outbox and the workers' heartbeats (ADR 0012).

An OutboxMessage is a Celery task to publish, written in the same transaction as the change that
needs it: if the transaction commits, the row exists and a relay will publish it (after the
commit, from a beat task, from every worker's heartbeat thread and at worker start-up) until the
broker takes it; if it rolls back, nothing was queued. A broker outage delays work, never loses it.

A WorkerHeartbeat row is refreshed by every Celery worker every few seconds, independently of
beat; pages and `manage.py analyze --wait` read it to say when no worker is alive."""

from __future__ import annotations

from django.db import models


class OutboxMessage(models.Model):
    task = models.CharField(max_length=200, help_text="The Celery task name, e.g. runs.tasks.run_step_task.")
    kwargs = models.JSONField(default=dict, blank=True)
    # Two writes of the same intent (a double click, a retried request) share a key: one row.
    dedupe_key = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Not published before this time. A relay claims a row by moving it forward (compare-and-set),
    # and a failed publish moves it forward by a backoff.
    available_at = models.DateTimeField()
    relayed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["dedupe_key"], name="outbox_dedupe_key_unique",
                                    condition=models.Q(dedupe_key__isnull=False)),
        ]
        indexes = [
            # The relay's query: pending rows by due time (a partial index stays as small as the backlog).
            models.Index(fields=["available_at"], name="outbox_pending_idx", condition=models.Q(relayed_at__isnull=True)),
        ]

    def __str__(self) -> str:
        state = "relayed" if self.relayed_at else "pending"
        return f"O{self.pk} {self.task} ({state})"

    @property
    def is_relayed(self) -> bool:
        return self.relayed_at is not None


class WorkerHeartbeat(models.Model):
    """One row per Celery worker node (its hostname, e.g. celery@host), refreshed while it lives."""

    name = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return f"{self.name} (seen {self.last_seen_at:%Y-%m-%d %H:%M:%S})"


class DutyTurn(models.Model):
    """Whose turn it is to do a periodic duty (reaping expired run leases ...): every worker may do
    it, one per interval. A worker takes the turn with a compare-and-set on `due_at`
    (outbox.services.duty_turn_take), so of all the workers that look at once, exactly one does it."""

    name = models.CharField(max_length=100, unique=True)
    due_at = models.DateTimeField(help_text="The next turn may be taken from this moment on.")
    taken_by = models.CharField(max_length=255, blank=True)
    taken_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} (next due {self.due_at:%Y-%m-%d %H:%M:%S})"


class BeatHeartbeat(models.Model):
    """One row per Celery beat (its host), refreshed by beat's scheduler on every tick: a beat that
    died is visible (/readyz `degraded`, drift_report, a metric) instead of silently missing."""

    name = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField(default=0)
    last_seen_at = models.DateTimeField()

    class Meta:
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return f"{self.name} (seen {self.last_seen_at:%Y-%m-%d %H:%M:%S})"
