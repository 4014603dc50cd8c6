"""Drift checks of the outbox (registered in ops.drift.CHECKS):

- outbox_backlog: an outbox row not relayed ARBITER_OUTBOX_DRIFT_AFTER_SECONDS after it was written
  (the broker has been down that long, or no relay runs: no worker, no beat);
- beat_missing: celery beat's heartbeat is older than ARBITER_BEAT_MISSING_AFTER_SECONDS: the
  workers still recover runs, but beat's hourly and daily jobs wait.

The checks of notice delivery are the cases app's (cases/drift.py)."""

from __future__ import annotations

from django.conf import settings

from ops.drift import DriftFinding
from outbox.health import beat_missing
from outbox.selectors import outbox_pending


def _finding(check: str, message: str, objects: list[str]) -> DriftFinding:
    return DriftFinding(check, message, objects)


def check_outbox_backlog(*, tenant_id: int | None = None) -> list:
    """Outbox rows carry no tenant (a task's kwargs name its objects, of any tenant): a stuck
    broker is everybody's problem, so they are reported whatever `tenant_id` says."""
    threshold = settings.ARBITER_OUTBOX_DRIFT_AFTER_SECONDS
    found = []
    for row in outbox_pending(older_than_seconds=threshold)[:200]:
        error = f" Last error: {row.last_error}" if row.last_error else ""
        found.append(_finding(
            "outbox_backlog",
            f"Outbox O{row.pk} ({row.task} {row.kwargs}) written {row.created_at:%Y-%m-%d %H:%M:%S} UTC is not "
            f"published after {row.attempts} attempt(s).{error} Check the broker and that a worker or beat runs "
            f"(the admin's 'relay now' retries it at once).", [f"outbox:{row.pk}"]))
    return found


def check_beat_missing(*, tenant_id: int | None = None) -> list:
    """Beat serves every tenant: reported whatever `tenant_id` says. A beat that never ran on this
    database is not drift (a fresh install, tests); /readyz says so as `degraded`."""
    reason = beat_missing(never_seen_is_missing=False)
    return [_finding("beat_missing", f"{reason[0].upper()}{reason[1:]}.", ["beat"])] if reason else []
