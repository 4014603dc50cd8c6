"""Celery: the broker, task defaults, and beat's schedule (every periodic task in one place, each at
the interval its own settings module names)."""

from pathlib import Path

from config.env import env_bool, env_int, env_str
from config.settings.api import ARBITER_WEBHOOK_POLL_SECONDS
from config.settings.audit import ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS
from config.settings.base import TIME_ZONE, VAR_DIR
from config.settings.cases import (
    ARBITER_DEADLINE_SCAN_INTERVAL_SECONDS,
    ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS,
)
from config.settings.operations import (
    ARBITER_DASHBOARD_REFRESH_SECONDS,
    ARBITER_OUTBOX_RELAY_INTERVAL_SECONDS,
)
from config.settings.runs import ARBITER_REAP_INTERVAL_SECONDS, ARBITER_RUN_STEP_TIME_LIMIT

# --- Celery --------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_DIR = Path(env_str("CELERY_BROKER_DIR", str(VAR_DIR / "broker")))
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# When the broker connection drops, tasks already running finish (their late ack is lost and the
# broker redelivers them; every task is idempotent) rather than being cancelled mid-way: a notice
# cancelled inside its SMTP conversation would be left `unknown`. Celery 6 changes the default;
# this keeps the behaviour (config/celery.py silences Celery's warning about the coming default).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=1)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = env_str("CELERY_BEAT_SCHEDULE_FILENAME", str(VAR_DIR / "celerybeat-schedule"))
# Redis (and SQS) redeliver a message nobody acknowledged after the visibility timeout: an hour by
# default, i.e. a killed worker's tasks would wait an hour. Tasks are acked late, so the timeout must
# exceed the longest a task may run: the largest hard time limit, plus a margin.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": max(CELERY_TASK_TIME_LIMIT, ARBITER_RUN_STEP_TIME_LIMIT) + 60,
}
# Beat records its own heartbeat as it ticks (outbox.beat): a missing beat shows on /readyz.
CELERY_BEAT_SCHEDULER = "outbox.beat:HeartbeatScheduler"
CELERY_BEAT_SCHEDULE = {
    # Every worker reaps expired leases (ARBITER_WORKER_DUTIES); beat's reaper is a second path, at
    # most every 30 s.
    "reap-expired-run-leases": {"task": "runs.tasks.reap_expired_leases_task",
                                "schedule": float(max(ARBITER_REAP_INTERVAL_SECONDS, 30))},
    "purge-expired-state": {"task": "runs.tasks.retention_purge_task", "schedule": float(24 * 60 * 60)},
    "anchor-audit-heads": {"task": "audit.tasks.audit_anchor_task",
                           "schedule": float(ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS)},
    "record-deadline-crossings": {"task": "cases.tasks.deadline_crossings_task",
                                  "schedule": float(ARBITER_DEADLINE_SCAN_INTERVAL_SECONDS)},
    "relay-outbox": {"task": "outbox.tasks.outbox_relay_task",
                     "schedule": float(ARBITER_OUTBOX_RELAY_INTERVAL_SECONDS)},
    "redeliver-lost-notice-dispatches": {"task": "cases.tasks.notice_dispatch_redeliver_task",
                                         "schedule": float(max(ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS // 2,
                                                               5))},
    "deliver-due-webhooks": {"task": "integrations.tasks.webhook_deliver_due_task",
                             "schedule": float(ARBITER_WEBHOOK_POLL_SECONDS)},
    "purge-expired-idempotency-keys": {"task": "integrations.tasks.idempotency_purge_task",
                                       "schedule": float(60 * 60)},
    "refresh-dashboard": {"task": "reports.tasks.dashboard_refresh_task",
                          "schedule": float(ARBITER_DASHBOARD_REFRESH_SECONDS)},
}
# var/ and the beat schedule's folder exist whatever the database and broker (celery beat cannot
# create its schedule file otherwise).
for _directory in (VAR_DIR, Path(CELERY_BEAT_SCHEDULE_FILENAME).parent):
    _directory.mkdir(parents=True, exist_ok=True)
