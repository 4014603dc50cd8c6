"""The transactional outbox: rows commit or roll back with the change, the relay publishes each
row once (compare-and-set claim), a broker outage leaves rows pending instead of failing the
request, and drift_report names what waits too long."""

from __future__ import annotations

import threading
from datetime import timedelta
from unittest import mock

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerDown

from audit.models import AuditEvent
from cases import services as case_services
from ops.drift import run_drift_checks
from outbox import services
from outbox.models import OutboxMessage, WorkerHeartbeat
from outbox.selectors import worker_status
from runs.models import AgentRun
from tests.factories import make_case

pytestmark = pytest.mark.django_db

TASK = "tests.outbox.fake_task"


@pytest.fixture
def published(monkeypatch):
    """What the relay hands to the broker, per task, instead of a broker."""
    calls = []
    monkeypatch.setitem(services.PUBLISHERS, TASK, "tests.outbox.test_outbox.record_publish")
    record_publish.calls = calls
    return calls


def record_publish(**kwargs):
    if getattr(record_publish, "broker_down", False):
        raise BrokerDown("Error 111 connecting to 127.0.0.1:6399. Connection refused.")
    record_publish.calls.append(kwargs)


@pytest.fixture(autouse=True)
def _broker_up():
    record_publish.broker_down = False
    yield
    record_publish.broker_down = False


def test_a_row_commits_with_the_change_and_is_published_after_the_commit(published,
                                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            row = services.outbox_enqueue(task=TASK, kwargs={"n": 1})
            assert published == []  # nothing reaches the broker before the commit
    row.refresh_from_db()
    assert published == [{"n": 1}] and row.is_relayed and row.attempts == 1 and row.last_error == ""


def test_a_rolled_back_change_leaves_no_row_and_publishes_nothing(published, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(RuntimeError):
        with transaction.atomic():
            services.outbox_enqueue(task=TASK, kwargs={"n": 1})
            raise RuntimeError("the change failed")
    assert callbacks == [] and published == [] and not OutboxMessage.objects.exists()


def test_a_dedupe_key_makes_a_second_enqueue_return_the_first_row(published):
    first = services.outbox_enqueue(task=TASK, kwargs={"n": 1}, dedupe_key="k:1")
    second = services.outbox_enqueue(task=TASK, kwargs={"n": 2}, dedupe_key="k:1")
    assert first.pk == second.pk and OutboxMessage.objects.count() == 1


def test_non_json_kwargs_are_refused_before_anything_is_written():
    with pytest.raises(TypeError):
        services.outbox_enqueue(task=TASK, kwargs={"when": timezone.now()})
    assert not OutboxMessage.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_enqueue_outside_a_transaction_is_refused_and_writes_nothing():
    assert not connection.in_atomic_block
    with pytest.raises(services.OutboxOutsideTransaction, match="inside the transaction"):
        services.outbox_enqueue(task=TASK, kwargs={})
    assert not OutboxMessage.objects.exists()


def test_a_broker_outage_leaves_the_row_pending_with_the_error_and_backs_off(published,
                                                                            django_capture_on_commit_callbacks):
    record_publish.broker_down = True
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            row = services.outbox_enqueue(task=TASK, kwargs={"n": 1})
    row.refresh_from_db()
    assert not row.is_relayed and row.attempts == 1 and "Connection refused" in row.last_error
    assert row.available_at > timezone.now()  # backing off: the next relay pass does not hammer the broker
    assert services.outbox_relay().published == []

    record_publish.broker_down = False
    report = services.outbox_relay(now=row.available_at + timedelta(seconds=1))
    row.refresh_from_db()
    assert report.published == [row.pk] and row.is_relayed and published == [{"n": 1}]
    assert services.outbox_relay(now=timezone.now() + timedelta(hours=1)).published == []  # never twice


def test_a_row_claimed_by_another_relay_is_skipped(published):
    row = services.outbox_enqueue(task=TASK, kwargs={"n": 1}, relay_on_commit=False)
    # Another relay claimed it a moment ago (the compare-and-set moved available_at forward).
    OutboxMessage.objects.filter(pk=row.pk).update(available_at=timezone.now() + timedelta(seconds=30))
    assert services.outbox_relay(ids=[row.pk]).published == []
    assert published == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_relays_publish_every_row_exactly_once(published):
    with transaction.atomic():
        rows = [services.outbox_enqueue(task=TASK, kwargs={"n": i}, relay_on_commit=False).pk for i in range(60)]
    barrier = threading.Barrier(6)

    def relay():
        barrier.wait()
        try:
            services.outbox_relay()
        finally:
            connection.close()

    threads = [threading.Thread(target=relay) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(call["n"] for call in published) == list(range(60))
    assert OutboxMessage.objects.filter(pk__in=rows, relayed_at__isnull=False).count() == 60


def test_relay_now_in_the_admin_publishes_pending_rows(client, django_user_model, admin_user, published):
    # Outbox rows name objects of every tenant: superusers only (a tenant's admin does not see them).
    client.force_login(admin_user)
    assert client.get(reverse("admin:outbox_outboxmessage_changelist")).status_code == 403
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.org", "pw"))
    admin_client = client
    row = services.outbox_enqueue(task=TASK, kwargs={"n": 7}, relay_on_commit=False)
    OutboxMessage.objects.filter(pk=row.pk).update(available_at=timezone.now() + timedelta(seconds=60))
    response = admin_client.post(reverse("admin:outbox_outboxmessage_changelist"),
                                 {"action": "relay_now", "_selected_action": [row.pk]}, follow=True)
    assert response.status_code == 200 and "published 1" in response.content.decode()
    row.refresh_from_db()
    assert row.is_relayed and published == [{"n": 7}]


# --- the flows routed through the outbox --------------------------------------------------------

def test_sending_a_notice_with_the_broker_down_answers_success_and_keeps_the_task(
        client, analyst, supervisor, case, django_capture_on_commit_callbacks):
    from tests.web.test_actions import HTMX, _pending_notice, url

    notice = _pending_notice(analyst, case)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    client.force_login(analyst)
    with mock.patch("cases.tasks.notice_dispatch_task.delay", side_effect=BrokerDown("Connection refused")):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(url("notice_send", case, notice.pk), **HTMX)
    assert response.status_code == 200 and "Sending: the notice" in response.content.decode()
    row = OutboxMessage.objects.get(task="cases.tasks.notice_dispatch_task")
    assert row.kwargs == {"notice_id": notice.pk, "actor_user_id": analyst.pk}
    assert not row.is_relayed and "Connection refused" in row.last_error
    assert AuditEvent.objects.filter(action="cases.notice.dispatch_requested", target_id=str(notice.pk)).exists()

    with mock.patch("cases.tasks.notice_dispatch_task.delay") as delay:  # the broker is back
        services.outbox_relay(now=timezone.now() + timedelta(minutes=2))
    delay.assert_called_once_with(notice.pk, analyst.pk)


def test_a_double_click_on_send_writes_one_outbox_row(analyst, supervisor, case):
    from tests.web.test_actions import _pending_notice

    notice = _pending_notice(analyst, case)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    case_services.notice_dispatch_request(actor=analyst, notice=notice)
    case_services.notice_dispatch_request(actor=analyst, notice=notice)
    assert OutboxMessage.objects.filter(task="cases.tasks.notice_dispatch_task").count() == 1


def test_the_api_answers_202_for_a_dispatch_with_the_broker_down(analyst, supervisor, case,
                                                                 django_capture_on_commit_callbacks):
    from rest_framework.test import APIClient

    from tests.web.test_actions import _pending_notice

    notice = _pending_notice(analyst, case)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    api = APIClient()
    api.force_authenticate(analyst)
    with mock.patch("cases.tasks.notice_dispatch_task.delay", side_effect=BrokerDown("Connection refused")):
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(f"/api/v1/notices/{notice.pk}/dispatch/")
    assert response.status_code == 202, response.content
    assert OutboxMessage.objects.filter(relayed_at__isnull=True).count() == 1


def test_starting_an_analysis_with_the_broker_down_answers_success(client, analyst, case, monkeypatch,
                                                                  django_capture_on_commit_callbacks):
    def broker_down(run_id, **kwargs):
        raise BrokerDown("Error 111 connecting to redis. Connection refused.")

    monkeypatch.setattr("runs.tasks.enqueue_step", broker_down)
    client.force_login(analyst)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("web:case_analyse", args=[case.reference]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    run = AgentRun.objects.get(case=case)
    row = OutboxMessage.objects.get(task="runs.tasks.run_step_task")
    assert row.kwargs == {"run_id": run.pk, "expected_sequence": None} and not row.is_relayed


@pytest.mark.django_db(transaction=True)
def test_analyze_with_the_broker_down_starts_the_run_without_a_traceback(analyst, case, monkeypatch, capsys):
    def broker_down(run_id, **kwargs):
        raise BrokerDown("Error 111 connecting to redis. Connection refused.")

    monkeypatch.setattr("runs.tasks.enqueue_step", broker_down)
    call_command("analyze", case.reference, "--tenant", case.tenant.slug)
    out = capsys.readouterr()
    run = AgentRun.objects.get(case=case)
    assert f"Started run R{run.pk}" in out.out and "Traceback" not in out.out + out.err
    assert "No worker has been seen yet" in out.err
    assert OutboxMessage.objects.get(task="runs.tasks.run_step_task").relayed_at is None


def test_analyze_wait_fails_with_a_clear_message_when_no_worker_runs_it(analyst, case, monkeypatch):
    from django.core.management.base import CommandError

    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kwargs: None)
    WorkerHeartbeat.objects.create(name="celery@gone", pid=1, started_at=timezone.now() - timedelta(hours=2),
                                   last_seen_at=timezone.now() - timedelta(hours=1))
    with pytest.raises(CommandError, match=r"still queued after 0.6s\. No worker has been seen since .* UTC"):
        call_command("analyze", case.reference, "--tenant", case.tenant.slug, "--wait", "--timeout", "0.6")


# --- idempotent starts ---------------------------------------------------------------------------

def test_starting_an_analysis_twice_returns_the_queued_run_and_writes_nothing(analyst, case):
    from runs import services as run_services
    from tests.helpers import assert_nothing_changed

    first = run_services.run_start(actor=analyst, case=case)
    with assert_nothing_changed(case, extra={"runs": lambda: AgentRun.objects.count()}):
        again = run_services.run_start(actor=analyst, case=case)
    assert again.pk == first.pk and again.already_active
    other = run_services.run_start(actor=analyst, case=make_case(actor=analyst, title="Another"))
    assert other.pk != first.pk


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_starts_on_postgresql_make_one_run(analyst, case):
    from runs import services as run_services

    barrier = threading.Barrier(2)
    results, errors = [], []

    def start():
        barrier.wait()
        try:
            results.append(run_services.run_start(actor=analyst, case=case).pk)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(set(results)) == 1
    assert AgentRun.objects.filter(case=case).count() == 1
    assert OutboxMessage.objects.filter(task="runs.tasks.run_step_task").count() == 1


# --- worker heartbeats and drift ----------------------------------------------------------------

def test_worker_status_says_when_no_worker_was_seen(settings):
    assert worker_status().message.startswith("No worker has been seen yet")
    services.worker_heartbeat_record(name="celery@a", pid=10, starting=True)
    assert worker_status().alive == 1 and worker_status().message == ""
    later = timezone.now() + timedelta(seconds=settings.ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS + 1)
    assert "No worker has been seen since" in worker_status(now=later).message
    services.worker_heartbeat_stopped(name="celery@a")
    assert worker_status().alive == 0


def test_the_run_page_says_no_worker_was_seen(client, analyst, case):
    from runs import services as run_services

    run = run_services.run_start(actor=analyst, case=case)
    client.force_login(analyst)
    html = client.get(reverse("web:run_detail", args=[run.pk])).content.decode()
    assert "No worker has been seen yet" in html
    services.worker_heartbeat_record(name="celery@a", pid=10, starting=True)
    html = client.get(reverse("web:run_detail", args=[run.pk])).content.decode()
    assert "No worker has been seen" not in html


def test_drift_report_names_old_outbox_rows_and_requested_dispatches_that_never_started(analyst, supervisor,
                                                                                        case, settings):
    from tests.web.test_actions import _pending_notice

    notice = _pending_notice(analyst, case)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    case_services.notice_dispatch_request(actor=analyst, notice=notice)  # its task never runs
    assert run_drift_checks(only=["outbox_backlog", "dispatch_requested_not_started"]) == []  # not old yet
    settings.ARBITER_OUTBOX_DRIFT_AFTER_SECONDS = 60
    past = timezone.now() - timedelta(minutes=5)
    OutboxMessage.objects.update(created_at=past)
    with mock.patch("cases.drift.timezone.now", return_value=timezone.now() + timedelta(minutes=5)):
        found = run_drift_checks(only=["outbox_backlog", "dispatch_requested_not_started"])
    checks = sorted(f.check for f in found)
    assert checks == ["dispatch_requested_not_started", "outbox_backlog"], found
    assert any(f"notice:{notice.pk}" in f.objects for f in found)


def test_a_dispatch_whose_task_the_broker_lost_is_published_again_once(analyst, supervisor, case):
    from cases.services.dispatch import notice_dispatch_redeliver_lost
    from tests.web.test_actions import _pending_notice

    notice = _pending_notice(analyst, case)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    case_services.notice_dispatch_request(actor=analyst, notice=notice)
    row = OutboxMessage.objects.get(task="cases.tasks.notice_dispatch_task")
    assert notice_dispatch_redeliver_lost(older_than_seconds=60) == []  # not published yet: the relay's job
    OutboxMessage.objects.filter(pk=row.pk).update(relayed_at=timezone.now() - timedelta(minutes=5))
    # Published 5 minutes ago and the notice is still approved with no dispatch: the broker lost it.
    assert notice_dispatch_redeliver_lost(older_than_seconds=60) == [notice.pk]
    again = OutboxMessage.objects.exclude(pk=row.pk).get()
    assert again.kwargs == row.kwargs and not again.is_relayed
    assert notice_dispatch_redeliver_lost(older_than_seconds=60) == []  # the new row is pending: no third
    case_services.notice_dispatch(actor=analyst, notice=notice)  # the task ran after all
    OutboxMessage.objects.filter(pk=again.pk).update(relayed_at=timezone.now() - timedelta(minutes=5))
    assert notice_dispatch_redeliver_lost(older_than_seconds=60) == []


def test_a_worker_heartbeat_tick_records_the_worker_and_relays_the_outbox(published):
    from outbox.heartbeat import WorkerHeartbeatThread

    services.outbox_enqueue(task=TASK, kwargs={"n": 3}, relay_on_commit=False)
    WorkerHeartbeatThread("celery@host-1").tick(starting=True)
    assert WorkerHeartbeat.objects.get(name="celery@host-1").stopped_at is None
    assert published == [{"n": 3}] and worker_status().alive == 1


def test_redis_redelivers_an_unacknowledged_task_soon_after_its_time_limit(settings):
    from config.celery import app

    expected = max(settings.CELERY_TASK_TIME_LIMIT, settings.ARBITER_RUN_STEP_TIME_LIMIT) + 60
    assert settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] == expected < 3600
    if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        assert app.conf.broker_transport_options["visibility_timeout"] == expected


def test_a_relay_pass_stops_at_the_first_broker_error_and_leaves_the_rest_due(published):
    rows = [services.outbox_enqueue(task=TASK, kwargs={"n": i}, relay_on_commit=False).pk for i in range(3)]
    record_publish.broker_down = True
    report = services.outbox_relay()
    assert report.failed == rows[:1] and report.published == []
    assert list(OutboxMessage.objects.filter(pk__in=rows[1:]).values_list("attempts", flat=True)) == [0, 0]
    record_publish.broker_down = False
    later = timezone.now() + timedelta(seconds=services.MAX_BACKOFF_SECONDS + 1)
    assert sorted(services.outbox_relay(now=later).published) == rows
