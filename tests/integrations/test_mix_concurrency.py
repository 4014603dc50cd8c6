"""A mix of writers on one case, on PostgreSQL with real threads, for ARBITER_MIX_TEST_SECONDS
(config/settings_test.py; 15 s by default, the report's figure is 60 s): run steps (the executor,
as a worker runs them), evidence adds, notice drafts and submissions, approvals of proposals and
notices (through the API, as people), webhook deliveries and redeliveries.

What it asserts: no deadlock or serialization failure reaches a caller (no 5xx answer, no
exception out of a run step or a delivery) — PostgreSQL may still detect some, which the retries
absorb, and the test prints how many; and no event is lost: every audit event of a mirrored action
has its integration event, every integration event its feed sequence (contiguous) and one delivery
to the endpoint that subscribes to everything."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from django.conf import settings as django_settings
from django.db import connection
from rest_framework.test import APIClient

from audit.models import AuditEvent
from cases.models import Notice, NoticeStatus, Proposal, ProposalStatus
from integrations.catalogue import event_type_for
from integrations.events import feed_assign
from integrations.models import DeliveryStatus, EventType, IntegrationEvent, WebhookDelivery
from integrations.webhook_delivery import webhook_deliver
from integrations.webhooks import webhook_endpoint_create
from runs import services as run_services
from runs.executor import run_step
from runs.models import AgentRun, RunStatus

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _deadlocks_detected() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


class Mix:
    """The shared state of the threads: a stop time, and what each saw."""

    def __init__(self, seconds: float):
        self.until = time.monotonic() + seconds
        self.lock = threading.Lock()
        self.answers: Counter = Counter()
        self.surfaced: list[str] = []

    def running(self) -> bool:
        return time.monotonic() < self.until

    def answered(self, kind: str, response) -> None:
        with self.lock:
            self.answers[(kind, response.status_code)] += 1
            if response.status_code >= 500:
                self.surfaced.append(f"{kind}: {response.status_code} {response.content[:200]!r}")


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _runner(mix: Mix, analyst, case, worker: str) -> None:
    while mix.running():
        run = run_services.run_start(actor=analyst, case=case, enqueue=False)
        for _ in range(60):
            outcome = run_step(run_id=run.pk, worker_id=worker, enqueue=False)
            status = AgentRun.objects.filter(pk=run.pk).values_list("status", flat=True).get()
            if status in (*RunStatus.terminal(), RunStatus.WAITING) or not mix.running():
                break
            if outcome.action in ("not_admitted", "busy", "not_due"):
                time.sleep(0.05)
        with mix.lock:
            mix.answers[("run", status)] += 1


def _evidence(mix: Mix, analyst, case) -> None:
    client, index = _client(analyst), 0
    while mix.running():
        index += 1
        mix.answered("evidence", client.post(f"/api/v1/cases/{case.reference}/evidence/",
                                             {"title": f"Letter {index}", "text": "A later letter."}, format="json"))


def _drafts(mix: Mix, analyst, case) -> None:
    client, index = _client(analyst), 0
    while mix.running():
        index += 1
        response = client.post(f"/api/v1/cases/{case.reference}/notices/",
                               {"subject": f"Update {index}", "body": "We are reviewing your complaint."},
                               format="json")
        mix.answered("draft", response)
        if response.status_code == 201:
            mix.answered("submit", client.post(f"/api/v1/notices/{response.json()['id']}/submit/", {},
                                               format="json"))


def _approvals(mix: Mix, supervisor, case) -> None:
    client = _client(supervisor)
    while mix.running():
        proposal = Proposal.objects.filter(case=case, status=ProposalStatus.PENDING).order_by("?").first()
        if proposal is not None:
            mix.answered("approve proposal", client.post(f"/api/v1/proposals/{proposal.pk}/approve/",
                                                         {"note": "Agreed."}, format="json"))
        notice = Notice.objects.filter(case=case, status=NoticeStatus.PENDING_APPROVAL).order_by("?").first()
        if notice is not None:
            mix.answered("approve notice", client.post(f"/api/v1/notices/{notice.pk}/approve/", {
                "content_hash": notice.content_hash, "override_reason": "Read it."}, format="json"))
        if proposal is None and notice is None:
            time.sleep(0.05)


def _deliveries(mix: Mix) -> None:
    while mix.running():
        pending = list(WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).values_list("pk", flat=True)[:20])
        for delivery_id in random.sample(pending, len(pending)):
            webhook_deliver(delivery_id=delivery_id)
        if not pending:
            time.sleep(0.05)


def _redeliveries(mix: Mix, supervisor) -> None:
    client = _client(supervisor)
    while mix.running():
        failed = list(WebhookDelivery.objects.filter(status=DeliveryStatus.FAILED).values_list("pk", flat=True)[:20])
        if failed:
            mix.answered("redeliver", client.post(f"/api/v1/webhook-deliveries/{random.choice(failed)}/redeliver/",
                                                  {}, format="json"))
        else:
            time.sleep(0.05)


def _thread(mix: Mix, errors: list, work, *args) -> threading.Thread:
    def run():
        try:
            work(mix, *args)
        except Exception as exc:  # a deadlock reaching a caller, or any other failure: the test names it
            errors.append(f"{work.__name__}: {type(exc).__name__}: {exc}")
        finally:
            connection.close()

    thread = threading.Thread(target=run, name=work.__name__)
    thread.start()
    return thread


def test_a_mix_of_writers_on_one_case_surfaces_no_deadlock_and_loses_no_event(
        analyst, supervisor, case, receiver, settings, monkeypatch, capsys):
    settings.ARBITER_WEBHOOK_MAX_ATTEMPTS = 1  # a receiver error fails the delivery: redeliveries follow
    settings.ARBITER_WEBHOOK_DISABLE_AFTER = 10**6
    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 100
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)
    monkeypatch.setattr("integrations.tasks.webhook_deliver_task.delay", lambda delivery_id: None)
    monkeypatch.setattr("cases.tasks.notice_dispatch_task.delay", lambda notice_id: None)
    receiver.statuses = [500] * 10**6
    events_before = IntegrationEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url,
                                          event_types=[kind for kind in EventType.values if kind != EventType.PING])
    seconds = django_settings.ARBITER_MIX_TEST_SECONDS
    mix, errors, deadlocks_before = Mix(seconds), [], _deadlocks_detected()
    plan = ([(_runner, analyst, case, f"w{index}") for index in range(4)]
            + [(_evidence, analyst, case)] * 4 + [(_drafts, analyst, case)] * 3
            + [(_approvals, supervisor, case)] * 3 + [(_deliveries,)] * 2 + [(_redeliveries, supervisor)] * 4)
    assert len(plan) == 20
    # The request handler and its middleware's metrics are loaded once before the threads start, as a
    # server loads them at start-up: 20 test clients loading them at once race to register the metrics.
    assert _client(analyst).get("/api/v1/me/").status_code == 200
    threads = [_thread(mix, errors, work, *args) for work, *args in plan]
    for thread in threads:
        thread.join(timeout=seconds + 180)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    detected = _deadlocks_detected() - deadlocks_before
    with capsys.disabled():
        print(f"\nmix {seconds}s: {sum(mix.answers.values())} operations, deadlocks detected by PostgreSQL and "
              f"absorbed: {detected}, surfaced: {len(mix.surfaced) + len(errors)}; {dict(mix.answers)}")
    assert (mix.surfaced, errors) == ([], [])
    for kind in ("evidence", "draft", "run"):
        assert any(seen == kind for seen, _status in mix.answers), f"no {kind} happened"

    while feed_assign():
        pass
    mirrored = [event.pk for event in AuditEvent.objects.filter(tenant_id=case.tenant_id).only("pk", "action")
                if event_type_for(event.action) is not None]
    events = IntegrationEvent.objects.filter(tenant_id=case.tenant_id)
    assert sorted(events.values_list("audit_event_id", flat=True)) == sorted(mirrored)  # none lost, none twice
    sequences = sorted(IntegrationEvent.objects.values_list("feed_sequence", flat=True))
    assert None not in sequences and sequences == list(range(sequences[0], sequences[0] + len(sequences)))
    per_event = Counter(WebhookDelivery.objects.filter(endpoint=endpoint).values_list("event_id", flat=True))
    assert set(per_event.values()) <= {1}
    assert set(per_event) == set(events.filter(pk__gt=events_before).values_list("pk", flat=True))
