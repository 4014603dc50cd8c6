"""The lock order of ADR 0022 on PostgreSQL, with real threads: a redelivery and a change that
records an event for the same endpoint interleave without a deadlock.

Each thread has its own database connection (Django opens one per thread) and closes it at the
end. The rows they work on are committed first, hence transaction=True."""

import logging
import threading
import time

import pytest
from django.db import connection, transaction

from audit.models import AuditEvent
from audit.services import audit_record
from cases import services
from cases.models import Case, CaseEvent
from core.errors import NotAllowed
from integrations.models import DeliveryStatus, IntegrationEvent, WebhookDelivery, WebhookEndpoint
from integrations.webhooks import (
    webhook_endpoint_delete,
    webhook_endpoint_update,
    webhook_ping,
    webhook_redeliver,
    webhook_redeliver_since,
    webhook_secret_rotate,
)
from tests.factories import make_case

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _in_thread(work, results: dict, name: str) -> threading.Thread:
    def run():
        try:
            results[name] = work()
        except Exception as exc:  # the test inspects what each thread got
            results[name] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _finishing_run(tenant_id: int, head_held: threading.Event):
    """What a finishing run without a case does: append to the tenant's stream (holding its head),
    then record `runs.run.completed`, whose delivery row references the endpoint."""
    with transaction.atomic():
        audit_record(tenant_id=tenant_id, actor_type="agent", actor_id="agent:test", action="runs.step.completed",
                     target_type="run", target_id=1)
        head_held.set()
        time.sleep(0.6)  # the other thread now locks what it locks first
        audit_record(tenant_id=tenant_id, actor_type="agent", actor_id="agent:test", action="runs.run.completed",
                     target_type="run", target_id=1)
    return "committed"


def _failed_delivery(analyst):
    make_case(actor=analyst)
    delivery = WebhookDelivery.objects.get()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.FAILED, attempts=6)
    return WebhookDelivery.objects.get(pk=delivery.pk)


@pytest.mark.parametrize("action", ["redeliver", "disable"])
def test_a_webhook_change_and_an_event_for_its_endpoint_interleave_without_deadlock(
        action, analyst, supervisor, endpoint, kicked, caplog):
    delivery = _failed_delivery(analyst)
    head_held, results = threading.Event(), {}

    def webhook_change():
        head_held.wait(timeout=10)
        if action == "redeliver":
            return webhook_redeliver(actor=supervisor, delivery=delivery)
        return webhook_endpoint_update(actor=supervisor, endpoint=endpoint, is_active=False)

    caplog.set_level(logging.WARNING, logger="core.db")
    threads = [_in_thread(lambda: _finishing_run(supervisor.tenant_id, head_held), results, "run"),
               _in_thread(webhook_change, results, "webhook")]
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert results["run"] == "committed", results
    assert not isinstance(results["webhook"], Exception), results
    assert not [r for r in caplog.records if "lock conflict" in r.getMessage()], "it needed a retry"
    assert IntegrationEvent.objects.filter(type="run.finished").count() == 1
    if action == "redeliver":
        assert WebhookDelivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING
    else:
        endpoint.refresh_from_db()
        assert endpoint.is_active is False


@pytest.mark.parametrize("action", ["delete", "rotate", "ping", "redeliver_since", "enable"])
def test_the_other_endpoint_services_and_an_event_for_the_endpoint_interleave_without_deadlock(
        action, analyst, supervisor, endpoint, kicked, caplog):
    delivery = _failed_delivery(analyst)
    if action == "enable":
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
        endpoint.refresh_from_db()
    head_held, results = threading.Event(), {}
    work = {"delete": lambda: webhook_endpoint_delete(actor=supervisor, endpoint=endpoint),
            "rotate": lambda: webhook_secret_rotate(actor=supervisor, endpoint=endpoint),
            "ping": lambda: webhook_ping(actor=supervisor, endpoint=endpoint),
            "redeliver_since": lambda: webhook_redeliver_since(actor=supervisor, endpoint=endpoint,
                                                               since=delivery.event.occurred_at),
            "enable": lambda: webhook_endpoint_update(actor=supervisor, endpoint=endpoint, is_active=True)}[action]

    def webhook_change():
        head_held.wait(timeout=10)
        return work()

    caplog.set_level(logging.WARNING, logger="core.db")
    threads = [_in_thread(lambda: _finishing_run(supervisor.tenant_id, head_held), results, "run"),
               _in_thread(webhook_change, results, "webhook")]
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert results["run"] == "committed", results
    assert not isinstance(results["webhook"], Exception), results
    assert not [r for r in caplog.records if "lock conflict" in r.getMessage()], "it needed a retry"
    assert IntegrationEvent.objects.filter(type="run.finished").count() == 1
    if action == "delete":  # the run committed first (it held the head): its queued delivery was cancelled
        ran = WebhookDelivery.objects.get(endpoint=endpoint, event__type="run.finished")
        assert (ran.status, WebhookDelivery.objects.get(pk=delivery.pk).status) == (DeliveryStatus.CANCELLED,
                                                                                    DeliveryStatus.FAILED)
    elif action == "redeliver_since":
        assert WebhookDelivery.objects.get(pk=delivery.pk).status == DeliveryStatus.PENDING


def test_a_run_step_and_a_notice_draft_on_one_case_interleave_without_deadlock(analyst, case, caplog):
    """What the browser walk met: a run's step holds the case's audit head and then writes a row
    that references the case (its foreign-key check takes KEY SHARE on the case row), while an
    analyst's notice draft holds the case row and waits for the head. The case is locked FOR NO
    KEY UPDATE, which does not block that foreign-key check."""
    head_held, results = threading.Event(), {}

    def run_step():
        with transaction.atomic():
            audit_record(tenant_id=case.tenant_id, case_id=case.pk, actor_type="agent", actor_id="agent:test",
                         action="runs.step.completed", target_type="run", target_id=1)
            head_held.set()
            time.sleep(0.6)  # the draft now locks the case row and waits for the head
            CaseEvent.objects.create(tenant_id=case.tenant_id, case_id=case.pk, sequence=900,
                                     event_type="run.note", payload={}, case_version=case.version,
                                     actor_type="agent", actor_id="agent:test", policy_version="test")
        return "committed"

    def draft():
        head_held.wait(timeout=10)
        return services.notice_draft(actor=analyst, case=Case.objects.get(pk=case.pk), subject="S", body="B",
                                     recipient=case.complainant_email)

    threads = [_in_thread(run_step, results, "run"), _in_thread(draft, results, "draft")]
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert results["run"] == "committed", results
    assert not isinstance(results["draft"], Exception), results
    assert CaseEvent.objects.filter(case=case, event_type="run.note").count() == 1


def test_a_mix_of_writers_on_one_case_and_one_endpoint_meets_no_deadlock(analyst, supervisor, case, endpoint,
                                                                          kicked, caplog):
    """Six threads at once, each repeating one kind of write that shares the case, its audit head,
    the tenant's audit head or the endpoint: none fails on the database, and every event that a
    committed change recorded is in the feed (nothing lost)."""
    for _ in range(4):
        make_case(actor=analyst)
    WebhookDelivery.objects.update(status=DeliveryStatus.FAILED)
    deliveries = list(WebhookDelivery.objects.all())
    rounds, barrier, results = 6, threading.Barrier(6), {}

    def redeliver():
        outcomes = []
        for delivery in deliveries[:rounds]:
            try:
                webhook_redeliver(actor=supervisor, delivery=delivery)
            except NotAllowed:  # already queued again: a legitimate refusal, not a lock failure
                outcomes.append("refused")
        return outcomes

    def endpoint_edits():
        for index in range(rounds):
            webhook_endpoint_update(actor=supervisor, endpoint=endpoint, description=f"edit {index}")

    def tenant_runs_finishing():
        for _ in range(rounds):
            _finishing_run_now(supervisor.tenant_id)

    def case_run_steps():
        for index in range(rounds):
            with transaction.atomic():
                audit_record(tenant_id=case.tenant_id, case_id=case.pk, actor_type="agent", actor_id="agent:t",
                             action="runs.run.completed", target_type="run", target_id=index)
                # Counting down from far above: the services number their events max + 1.
                CaseEvent.objects.create(tenant_id=case.tenant_id, case_id=case.pk, sequence=10**6 - index,
                                         event_type="run.note", payload={}, case_version=1, actor_type="agent",
                                         actor_id="agent:t", policy_version="test")

    def notice_drafts():
        for index in range(rounds):
            services.notice_draft(actor=analyst, case=Case.objects.get(pk=case.pk), subject=f"S{index}", body="B",
                                  recipient=case.complainant_email)

    def evidence_adds():
        for index in range(rounds):
            services.evidence_add(actor=analyst, case=Case.objects.get(pk=case.pk), title=f"E{index}", text="T")

    def released(work):
        def run():
            barrier.wait(timeout=30)
            return work()
        return run

    caplog.set_level(logging.WARNING, logger="core.db")
    works = {"redeliver": redeliver, "endpoint": endpoint_edits, "tenant runs": tenant_runs_finishing,
             "case runs": case_run_steps, "drafts": notice_drafts, "evidence": evidence_adds}
    threads = [_in_thread(released(work), results, name) for name, work in works.items()]
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert not [name for name, result in results.items() if isinstance(result, Exception)], results
    audited = AuditEvent.objects.filter(action__in=["runs.run.completed", "cases.notice.drafted",
                                                    "cases.evidence.added"]).count()
    mirrored = IntegrationEvent.objects.filter(type__in=["run.finished", "notice.drafted", "evidence.added"]).count()
    assert audited == mirrored


def _finishing_run_now(tenant_id: int) -> None:
    with transaction.atomic():
        audit_record(tenant_id=tenant_id, actor_type="agent", actor_id="agent:test", action="runs.step.completed",
                     target_type="run", target_id=1)
        audit_record(tenant_id=tenant_id, actor_type="agent", actor_id="agent:test", action="runs.run.completed",
                     target_type="run", target_id=1)
