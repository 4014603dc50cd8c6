"""Recovery in seconds (ADR 0010 §6-7, the executor's side of losing no work): a dead worker's run is taken
over after a heartbeat timeout, not a full lease; a lost next-step message is found through the run
row (the step's outbox); run_step_task retries on database errors and on a run held by a worker
that looks dead."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from runs import services
from runs.executor import lease_reap_expired, run_step, run_steps
from runs.leases import heartbeat_scope, lease_renew
from runs.models import AgentRun, RunStatus, Step
from runs.state_load import state_at

pytestmark = pytest.mark.django_db


@pytest.fixture
def loop(analyst, tenant, test_graphs):
    def make(n=5):
        return services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": n}, enqueue=False)
    return make


def test_a_worker_whose_heartbeat_timed_out_is_taken_over_before_its_lease_expires(loop, settings, enqueued):
    settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS = 20
    run = loop()
    run_step(run_id=run.pk, worker_id="w1", enqueue=False, keep_lease=True)
    now = timezone.now()
    # w1 died 25 s ago: its lease still has minutes to run, its heartbeat is stale.
    AgentRun.objects.filter(pk=run.pk).update(lease_expires_at=now + timedelta(seconds=100),
                                              heartbeat_at=now - timedelta(seconds=25))
    assert lease_reap_expired() == [run.pk] and enqueued == [(run.pk, 2, 0)]
    assert run_step(run_id=run.pk, worker_id="w2", expected_sequence=2, enqueue=False).action == "executed"
    assert Step.objects.get(run=run, sequence=2).worker_id == "w2"


def test_a_live_worker_keeps_its_run_and_a_busy_delivery_says_when_to_come_back(loop, settings, enqueued):
    settings.ARBITER_RUN_HEARTBEAT_SECONDS = 5
    settings.ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS = 20
    run = loop()
    run_step(run_id=run.pk, worker_id="w1", enqueue=False, keep_lease=True)
    now = timezone.now()
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=now - timedelta(seconds=2))  # alive
    outcome = run_step(run_id=run.pk, worker_id="w2", enqueue=False)
    assert (outcome.action, outcome.retry_after) == ("busy", 0)
    assert lease_reap_expired() == [] and enqueued == []
    AgentRun.objects.filter(pk=run.pk).update(heartbeat_at=now - timedelta(seconds=12))  # silent for a while
    outcome = run_step(run_id=run.pk, worker_id="w2", enqueue=False)
    assert outcome.action == "busy" and 8 <= outcome.retry_after <= 10


def test_a_lost_next_step_message_is_re_enqueued_after_the_hand_off_deadline(loop, settings, enqueued,
                                                                            django_capture_on_commit_callbacks):
    settings.ARBITER_RUN_REENQUEUE_AFTER_SECONDS = 15
    run = loop()
    with django_capture_on_commit_callbacks(execute=True):
        run_step(run_id=run.pk, worker_id="w1")  # hands off: enqueues step 2 ...
    enqueued.clear()  # ... and the broker loses the message
    run.refresh_from_db()
    assert run.lease_owner is None
    assert timedelta(seconds=14) < run.lease_expires_at - timezone.now() <= timedelta(seconds=15)
    assert lease_reap_expired() == []  # not overdue yet
    assert lease_reap_expired(now=timezone.now() + timedelta(seconds=16)) == [run.pk]
    assert enqueued == [(run.pk, 2, 0)]


def test_a_broker_error_after_commit_loses_nothing(loop, monkeypatch, django_capture_on_commit_callbacks):
    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr("runs.tasks.enqueue_step", broker_down)
    run = loop()
    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(run_id=run.pk, worker_id="w1")
    assert outcome.action == "executed"  # committed; the message could not be sent
    run.refresh_from_db()
    assert (run.next_sequence, run.lease_owner) == (2, None)
    assert run.pk in lease_reap_expired(now=run.lease_expires_at + timedelta(seconds=1))


def test_run_steps_keeps_the_lease_for_its_slice_then_hands_off(loop, enqueued, django_capture_on_commit_callbacks):
    run = loop(n=30)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_steps(run_id=run.pk, worker_id="task-1", slice_seconds=3600)
    assert outcome.status == RunStatus.COMPLETED and enqueued == []
    assert state_at(run)[0].data["count"] == 30
    other = loop(n=30)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_steps(run_id=other.pk, worker_id="task-2", slice_seconds=0)
    assert (outcome.action, outcome.sequence) == ("executed", 1)
    assert enqueued == [(other.pk, 2, 0)]
    other.refresh_from_db()
    assert other.lease_owner is None


def test_run_step_task_retries_on_a_database_error(loop, monkeypatch):
    from celery.exceptions import Retry

    from runs import tasks

    run = loop()

    def database_down(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr("runs.executor.run_steps", database_down)
    retries = []

    def retry(*args, **kwargs):
        retries.append(kwargs)
        raise Retry("retry")

    monkeypatch.setattr(tasks.run_step_task, "retry", retry)
    with pytest.raises(Retry):
        tasks.run_step_task.apply(kwargs={"run_id": run.pk}, throw=True)
    assert tasks.run_step_task.autoretry_for and OperationalError in tasks.run_step_task.autoretry_for
    assert tasks.run_step_task.retry_backoff == 1
    assert retries and isinstance(retries[0]["exc"], OperationalError)


def test_the_heartbeat_renews_while_a_step_runs_and_notices_a_lost_lease(loop):
    run = loop()
    run_step(run_id=run.pk, worker_id="w1", enqueue=False, keep_lease=True)
    before = AgentRun.objects.get(pk=run.pk).heartbeat_at
    with heartbeat_scope(run.pk, "w1"):
        lease_renew(run.pk, "w1")
    assert AgentRun.objects.get(pk=run.pk).heartbeat_at > before
    AgentRun.objects.filter(pk=run.pk).update(lease_owner="w2")
    from runs.leases import LeaseLost

    with pytest.raises(LeaseLost):
        lease_renew(run.pk, "w1")
