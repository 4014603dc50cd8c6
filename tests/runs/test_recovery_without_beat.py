"""A dead worker's run resumes with beat down: the reaper is a duty of every worker's heartbeat
thread (ARBITER_WORKER_DUTIES), not only a beat task; and the default windows resume a run well
under 20 s after its worker died mid-step."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from outbox.heartbeat import WorkerHeartbeatThread, tick_seconds
from outbox.models import BeatHeartbeat
from runs import services
from runs.executor import run_step
from runs.models import AgentRun
from runs.state_cache import STATE_CACHE

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def forget_cached_states():
    """A cached state outlives its rolled-back run, whose id the next test reuses: start and end clean."""
    STATE_CACHE.clear()
    yield
    STATE_CACHE.clear()


def test_a_workers_heartbeat_thread_reaps_a_dead_workers_run_with_no_beat(analyst, tenant, test_graphs, enqueued):
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 5}, enqueue=False)
    run_step(run_id=run.pk, worker_id="w1", enqueue=False, keep_lease=True)
    silent = django_settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS + 1
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=silent))
    assert not BeatHeartbeat.objects.exists()  # no beat at all

    WorkerHeartbeatThread("celery@survivor").tick()
    assert enqueued == [(run.pk, 2, 0)]
    WorkerHeartbeatThread("celery@other").tick()  # same interval: the turn is taken, no second reap
    assert enqueued == [(run.pk, 2, 0)]


def test_default_windows_resume_a_run_under_20_seconds_after_its_worker_died():
    """Worst case after a SIGKILL: the last heartbeat was just renewed, so the run is claimable one
    timeout later; the reaper's turn comes at most one interval after that, and the heartbeat
    thread wakes at least that often. What remains of the 20 s is for the broker and the step."""
    worst = (django_settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS
             + django_settings.ARBITER_WORKER_DUTIES["reap-expired-run-leases"][1]
             + tick_seconds())
    assert worst <= 15
    assert django_settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS >= 3 * django_settings.ARBITER_RUN_HEARTBEAT_SECONDS
