"""The changes an integrator mirrors that were missing from the feed and webhooks: evidence added
(and its text extracted), notice drafted / submitted / rejected / withdrawn, run started — each
an event in the transaction of the change, delivered to endpoints that subscribe to it."""

import pytest

from cases import services
from integrations.events import event_type_for
from integrations.models import IntegrationEvent, WebhookDelivery
from integrations.webhooks import webhook_endpoint_create
from runs import services as run_services

pytestmark = pytest.mark.django_db

NEW_TYPES = ["evidence.added", "notice.drafted", "notice.submitted", "notice.rejected", "notice.withdrawn",
             "run.started"]


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)


@pytest.fixture
def subscriber(supervisor, receiver):
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=NEW_TYPES)
    return endpoint


def _events(kind: str) -> list[IntegrationEvent]:
    return list(IntegrationEvent.objects.filter(type=kind).order_by("id"))


def test_evidence_added_is_an_event_with_the_evidence_and_the_case(analyst, case, subscriber, kicked):
    before = len(_events("evidence.added"))  # the case was opened with its complaint as evidence
    evidence = services.evidence_add(actor=analyst, case=case, title="Bill", text="The bill shows 120 EUR.")
    events = _events("evidence.added")
    assert len(events) == before + 1
    event = events[-1]
    assert event.data["case"] == case.reference and event.data["target_id"] == str(evidence.pk)
    assert event.data["object_url"] == f"/api/v1/evidence/{evidence.pk}/download/"
    assert WebhookDelivery.objects.filter(endpoint=subscriber, event=event).count() == 1


def test_the_notice_lifecycle_is_in_the_feed(analyst, supervisor, case, subscriber, kicked):
    notice = services.notice_draft(actor=analyst, case=case, subject="S", body="B", recipient=case.complainant_email)
    notice = services.notice_submit(actor=analyst, notice=notice)
    notice = services.notice_reject(actor=supervisor, notice=notice, note="Say which bill.")
    notice = services.notice_withdraw(actor=analyst, notice=notice)
    for kind in ("notice.drafted", "notice.submitted", "notice.rejected", "notice.withdrawn"):
        [event] = _events(kind)
        assert event.data["object_url"] == f"/api/v1/notices/{notice.pk}/", kind
        assert WebhookDelivery.objects.filter(endpoint=subscriber, event=event).count() == 1, kind


def test_a_run_start_is_an_event(analyst, case, subscriber, kicked):
    run = run_services.run_start(actor=analyst, case=case)
    [event] = _events("run.started")
    assert event.data["run_id"] == run.pk and event.data["case"] == case.reference
    assert WebhookDelivery.objects.filter(endpoint=subscriber, event=event).count() == 1


def test_an_endpoint_gets_only_what_it_subscribed_to(analyst, supervisor, case, receiver, kicked):
    only_runs, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["run.started"])
    services.evidence_add(actor=analyst, case=case, title="Bill", text="The bill.")
    run_services.run_start(actor=analyst, case=case)
    assert sorted(WebhookDelivery.objects.filter(endpoint=only_runs).values_list("event__type", flat=True)) == [
        "run.started"]


def test_the_feed_filters_by_the_new_types(api, analyst, supervisor, case, kicked):
    services.evidence_add(actor=analyst, case=case, title="Bill", text="The bill.")
    run_services.run_start(actor=analyst, case=case)
    response = api(supervisor).get("/api/v1/events/?type=evidence.added")
    assert response.status_code == 200
    items = response.json()["results"]
    assert items and {item["type"] for item in items} == {"evidence.added"}
    assert len(items) == len(_events("evidence.added"))


@pytest.mark.parametrize("action, kind", [
    ("cases.evidence.added", "evidence.added"), ("cases.evidence.extracted", "evidence.extracted"),
    ("cases.notice.drafted", "notice.drafted"), ("cases.notice.submitted", "notice.submitted"),
    ("cases.notice.rejected", "notice.rejected"), ("cases.notice.withdrawn", "notice.withdrawn"),
    ("runs.run.started", "run.started"), ("cases.notice.edited", None), ("runs.run.admitted", None)])
def test_which_audit_actions_are_events(action, kind):
    assert event_type_for(action) == kind
