"""Recovery needs no beat: every worker's heartbeat thread offers to do the periodic duties (one
worker per interval, by a compare-and-set on a DutyTurn row), and a missing beat is visible
(/readyz `degraded`, drift_report, a metric) instead of silent. Outages are logged once each."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerOperationalError

from config.celery import app as celery_app
from core.outages import OutageLog
from ops import metrics
from ops.drift import run_drift_checks
from outbox import services
from outbox.beat import HeartbeatScheduler
from outbox.heartbeat import WorkerHeartbeatThread
from outbox.models import BeatHeartbeat, DutyTurn
from outbox.tasks import outbox_relay_task

pytestmark = pytest.mark.django_db

DONE: list[str] = []


def record_duty() -> None:
    DONE.append(threading.current_thread().name)


@pytest.fixture
def recorded_duty(settings):
    DONE.clear()
    settings.ARBITER_WORKER_DUTIES = {"test-duty": ("tests.outbox.test_duties_and_beat.record_duty", 30)}
    yield DONE
    DONE.clear()


def test_a_duty_turn_is_taken_once_per_interval_whoever_asks():
    now = timezone.now()
    assert services.duty_turn_take(name="reap", interval_seconds=10, holder="w1", now=now)  # first turn ever
    assert not services.duty_turn_take(name="reap", interval_seconds=10, holder="w2", now=now)
    assert not services.duty_turn_take(name="reap", interval_seconds=10, holder="w2", now=now + timedelta(seconds=9))
    assert services.duty_turn_take(name="reap", interval_seconds=10, holder="w2", now=now + timedelta(seconds=10))
    turn = DutyTurn.objects.get(name="reap")
    assert (turn.taken_by, turn.due_at) == ("w2", now + timedelta(seconds=20))


def test_two_workers_ticking_together_do_the_duty_once(recorded_duty):
    first, second = WorkerHeartbeatThread("celery@a"), WorkerHeartbeatThread("celery@b")
    first.tick(starting=True)
    second.tick(starting=True)
    first.tick()
    assert len(recorded_duty) == 1
    DutyTurn.objects.update(due_at=timezone.now() - timedelta(seconds=1))  # the interval has passed
    second.tick()
    first.tick()
    assert len(recorded_duty) == 2 and DutyTurn.objects.get().taken_by == "celery@b"


@pytest.mark.django_db(transaction=True)  # the thread closes broken connections, as in a worker
def test_a_database_outage_in_the_heartbeat_thread_is_one_warning_then_one_line_when_it_ends(
        recorded_duty, monkeypatch, caplog):
    thread = WorkerHeartbeatThread("celery@a")
    real = services.worker_heartbeat_record

    def down(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(services, "worker_heartbeat_record", down)
    monkeypatch.setattr(services, "duty_turn_take", lambda **kwargs: (_ for _ in ()).throw(OperationalError("x")))
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            thread.tick(starting=True)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(":")[1].strip() for r in warnings] == ["heartbeat failing", "test-duty failing"]
    assert not any(r.exc_info for r in warnings) and not any(r.levelno >= logging.ERROR for r in caplog.records)
    caplog.clear()
    monkeypatch.setattr(services, "worker_heartbeat_record", real)
    monkeypatch.undo()
    thread.tick(starting=True)
    assert any("heartbeat works again after 5 failure(s)" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db(transaction=True)  # the scheduler closes stale connections, as in beat
def test_beats_scheduler_records_its_heartbeat(settings):
    scheduler = HeartbeatScheduler.__new__(HeartbeatScheduler)  # its heartbeat alone, no schedule file
    scheduler.beat_name, scheduler.last_heartbeat = "beat@host", 0.0
    scheduler.outage = OutageLog("beat")
    scheduler.record_heartbeat()
    first = BeatHeartbeat.objects.get(name="beat@host").last_seen_at
    scheduler.record_heartbeat()
    assert BeatHeartbeat.objects.get(name="beat@host").last_seen_at >= first and BeatHeartbeat.objects.count() == 1


def test_a_missing_beat_is_listed_by_drift_report_once_it_had_been_seen(settings):
    settings.ARBITER_BEAT_MISSING_AFTER_SECONDS = 60
    assert run_drift_checks(only=["beat_missing"]) == []  # never ran here: a fresh install, not drift
    services.beat_heartbeat_record(name="beat@host", pid=1)
    assert run_drift_checks(only=["beat_missing"]) == []
    BeatHeartbeat.objects.update(last_seen_at=timezone.now() - timedelta(seconds=200))
    [finding] = run_drift_checks(only=["beat_missing"])
    assert finding.check == "beat_missing" and "has not been seen for 200 s (over 60 s" in finding.message
    assert "runs still recover through the workers" in finding.message
    assert metrics.BEAT_HEARTBEAT_AGE._value.get() >= 200


@pytest.mark.django_db(transaction=True)  # /readyz's checks run in a thread of their own
def test_readyz_is_degraded_not_503_while_beat_is_missing(client, settings):
    settings.ARBITER_READYZ_CHECKS = ["database", "beat_heartbeat"]
    settings.ARBITER_BEAT_MISSING_AFTER_SECONDS = 60
    response = client.get("/readyz")
    body = response.json()
    assert (response.status_code, body["status"]) == (200, "degraded")
    assert "celery beat has never sent a heartbeat" in body["checks"]["beat_heartbeat"]["error"]
    services.beat_heartbeat_record(name="beat@host", pid=1)
    assert client.get("/readyz").json()["status"] == "ready"
    BeatHeartbeat.objects.update(last_seen_at=timezone.now() - timedelta(seconds=90))
    response = client.get("/readyz")
    assert (response.status_code, response.json()["status"]) == (200, "degraded")
    assert "not been seen for 90 s" in response.json()["checks"]["beat_heartbeat"]["error"]
    settings.ARBITER_READYZ_CHECKS = ["beat_heartbeat", "nonexistent"]  # a real failure still wins
    response = client.get("/readyz")
    assert (response.status_code, response.json()["status"]) == (503, "not ready")


def test_beat_unable_to_reach_the_broker_says_it_once_then_once_with_the_count(tmp_path, monkeypatch, caplog):
    scheduler = HeartbeatScheduler(app=celery_app, schedule_filename=str(tmp_path / "beat-schedule"))
    entry = scheduler.schedule["relay-outbox"]
    task = celery_app.tasks[outbox_relay_task.name]  # the instance beat sends through

    def refused(*args, **kwargs):
        raise BrokerOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    sent = []
    monkeypatch.setattr(task, "apply_async", refused)
    with caplog.at_level(logging.INFO):
        for _ in range(4):
            scheduler.apply_entry(entry)
        monkeypatch.setattr(task, "apply_async", lambda *args, **kwargs: sent.append(1))
        scheduler.apply_entry(entry)
        scheduler.apply_entry(entry)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2 and len(sent) == 2
    assert warnings[0].startswith("beat: the broker failing: OperationalError: Error 111")
    assert warnings[1].startswith("beat: the broker works again after 4 failure(s)")
    assert not any(r.exc_info or "Message Error" in r.getMessage() for r in caplog.records)


def test_beat_still_reports_a_task_it_cannot_send_for_another_reason(tmp_path, monkeypatch, caplog):
    scheduler = HeartbeatScheduler(app=celery_app, schedule_filename=str(tmp_path / "beat-schedule"))
    entry = scheduler.schedule["relay-outbox"]
    monkeypatch.setattr(celery_app.tasks[outbox_relay_task.name], "apply_async",
                        lambda *args, **kwargs: (_ for _ in ()).throw(TypeError("a bug")))
    with caplog.at_level(logging.WARNING):
        scheduler.apply_entry(entry)
    assert [r.levelname for r in caplog.records] == ["ERROR"] and "Message Error" in caplog.records[0].getMessage()


def test_beat_connecting_to_a_broker_that_is_down_is_counted_in_the_same_outage(tmp_path, monkeypatch, caplog):
    scheduler = HeartbeatScheduler(app=celery_app, schedule_filename=str(tmp_path / "beat-schedule"))
    entry = scheduler.schedule["relay-outbox"]
    monkeypatch.setattr(celery_app.tasks[outbox_relay_task.name], "apply_async", lambda *args, **kwargs: None)
    beat_logger = logging.getLogger("celery.beat")
    with caplog.at_level(logging.INFO):
        for interval in (2.0, 4.0, 6.0):  # celery.beat's _ensure_connected, in its words
            beat_logger.error("beat: Connection error: %s. Trying again in %s seconds...",
                              BrokerOperationalError("Error 111 connecting. Connection refused."), interval)
        scheduler.apply_entry(entry)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2 and warnings[0].startswith("beat: the broker failing: OperationalError: Error 111")
    assert warnings[1].startswith("beat: the broker works again after 3 failure(s)")
