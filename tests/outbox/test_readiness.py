"""/readyz's outbox checks: a live worker heartbeat, and an outbox being relayed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from outbox.models import OutboxMessage, WorkerHeartbeat
from outbox.services import outbox_enqueue

# The checks run in a thread of their own (ops.health bounds them in time): it sees committed rows only.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def only_outbox_checks(settings):
    settings.ARBITER_READYZ_CHECKS = ["worker_heartbeat", "outbox_lag"]
    settings.ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS = 45
    settings.ARBITER_OUTBOX_DRIFT_AFTER_SECONDS = 300


def _checks(client):
    response = client.get("/readyz")
    return response.status_code, {name: check for name, check in response.json()["checks"].items()}


def test_no_worker_ever_seen_is_not_ready_and_says_what_to_do(client, only_outbox_checks):
    status, checks = _checks(client)
    assert status == 503
    assert "no worker has ever sent a heartbeat" in checks["worker_heartbeat"]["error"]
    assert checks["outbox_lag"]["ok"]


def test_a_recent_heartbeat_is_ready_and_a_stale_or_stopped_one_is_not(client, only_outbox_checks):
    now = timezone.now()
    beat = WorkerHeartbeat.objects.create(name="celery@a", pid=1, started_at=now, last_seen_at=now)
    assert _checks(client)[0] == 200
    WorkerHeartbeat.objects.filter(pk=beat.pk).update(last_seen_at=now - timedelta(seconds=120))
    status, checks = _checks(client)
    assert status == 503 and "no worker has been seen for 1" in checks["worker_heartbeat"]["error"]
    WorkerHeartbeat.objects.filter(pk=beat.pk).update(last_seen_at=now, stopped_at=now)
    assert _checks(client)[0] == 503


def test_an_outbox_row_waiting_too_long_is_not_ready(client, only_outbox_checks, settings):
    now = timezone.now()
    WorkerHeartbeat.objects.create(name="celery@a", pid=1, started_at=now, last_seen_at=now)
    with transaction.atomic():
        row = outbox_enqueue(task="runs.tasks.run_step_task", kwargs={"run_id": 1}, relay_on_commit=False)
    assert _checks(client)[0] == 200  # young: the relay has time
    OutboxMessage.objects.filter(pk=row.pk).update(created_at=now - timedelta(seconds=900))
    status, checks = _checks(client)
    assert status == 503 and "waits for 9" in checks["outbox_lag"]["error"]
    OutboxMessage.objects.filter(pk=row.pk).update(relayed_at=now)
    assert _checks(client)[0] == 200
