"""Webhooks and the event feed: events captured in the transaction of the change, signed deliveries
to a real local HTTP receiver, retries with backoff and an attempt log, automatic disabling,
redelivery, nothing lost while the broker is down, and the feed in commit order."""

import json
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from cases import services as case_services
from core.errors import Forbidden
from integrations.models import (
    DeliveryStatus,
    IntegrationEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from integrations.tasks import webhook_deliver_due_task
from integrations.webhook_delivery import webhook_deliver
from integrations.webhooks import verify_signature, webhook_endpoint_create
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


def _due_now():
    WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).update(next_attempt_at=timezone.now())


def test_a_change_writes_its_event_and_delivery_in_the_same_transaction(analyst, endpoint, kicked,
                                                                         django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        case = make_case(actor=analyst)
    # The endpoint subscribes to the former umbrella type case.changed: it receives case.created.
    event = IntegrationEvent.objects.get(type="case.created")  # and evidence.added: the complaint's text
    assert (event.type, event.data["case"], event.data["action"]) == ("case.created", case.reference,
                                                                       "cases.case.created")
    delivery = WebhookDelivery.objects.get()
    assert (delivery.endpoint, delivery.event, delivery.status) == (endpoint, event, DeliveryStatus.PENDING)
    assert kicked == [delivery.pk]


def test_a_rolled_back_change_leaves_no_event(analyst, endpoint):
    with pytest.raises(RuntimeError), transaction.atomic():
        make_case(actor=analyst)
        raise RuntimeError("the change fails after its audit event")
    assert IntegrationEvent.objects.count() == 0 and WebhookDelivery.objects.count() == 0


def test_unsubscribed_types_get_nothing_and_a_disabled_endpoint_queues_without_sending(
        analyst, supervisor, receiver, kicked, django_capture_on_commit_callbacks):
    webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["notice.sent"])
    disabled, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["case.changed"])
    WebhookEndpoint.objects.filter(pk=disabled.pk).update(is_active=False)
    with django_capture_on_commit_callbacks(execute=True):
        make_case(actor=analyst)
    assert IntegrationEvent.objects.filter(type="case.created").count() == 1
    delivery = WebhookDelivery.objects.get()  # only the disabled endpoint subscribes: queued for it
    assert (delivery.endpoint_id, delivery.status, delivery.attempts) == (disabled.pk, DeliveryStatus.PENDING, 0)
    assert kicked == []  # not handed to a worker ...
    assert webhook_deliver(delivery_id=delivery.pk) is None and webhook_deliver_due_task() == 0  # ... nor attempted
    assert receiver.received() == []


def test_the_delivery_is_signed_and_a_receiver_can_verify_it(analyst, endpoint, receiver, settings):
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert delivery.status == DeliveryStatus.SUCCEEDED
    request = receiver.next()
    headers, body = request["headers"], request["body"]
    assert verify_signature(secret=endpoint.plain_secret, header=headers["Arbiter-Signature"], body=body,
                            tolerance_seconds=settings.ARBITER_WEBHOOK_SIGNATURE_TOLERANCE_SECONDS)
    payload = json.loads(body)
    assert payload["type"] == "case.created" and headers["Arbiter-Event-Id"] == payload["id"]
    # Tampered, signed with another secret, or replayed later than the tolerance: refused.
    assert not verify_signature(secret=endpoint.plain_secret, header=headers["Arbiter-Signature"],
                                body=body + b" ", tolerance_seconds=300)
    assert not verify_signature(secret="whsec_other", header=headers["Arbiter-Signature"], body=body,
                                tolerance_seconds=300)
    assert not verify_signature(secret=endpoint.plain_secret, header=headers["Arbiter-Signature"], body=body,
                                tolerance_seconds=300, now=time.time() + 301)


def test_a_receiver_failure_is_retried_with_backoff_and_logged(analyst, endpoint, receiver, settings):
    settings.ARBITER_WEBHOOK_BACKOFF_SECONDS = 30
    receiver.statuses = [500, 503]
    make_case(actor=analyst)
    delivery = WebhookDelivery.objects.get()
    before = timezone.now()
    failed = webhook_deliver(delivery_id=delivery.pk)
    assert (failed.status, failed.attempts, failed.last_status_code) == (DeliveryStatus.PENDING, 1, 500)
    assert failed.next_attempt_at >= before + timedelta(seconds=30)
    assert webhook_deliver(delivery_id=delivery.pk) is None  # not due yet: nothing sent
    _due_now()
    second = webhook_deliver(delivery_id=delivery.pk)
    assert second.attempts == 2 and second.next_attempt_at >= timezone.now() + timedelta(seconds=59)
    _due_now()
    assert webhook_deliver_due_task() == 1
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    log = list(WebhookAttempt.objects.filter(delivery=delivery).values_list("number", "status_code", "succeeded"))
    assert log == [(1, 500, False), (2, 503, False), (3, 200, True)]
    assert [r["status"] for r in receiver.received()] == [500, 503, 200]
    endpoint.refresh_from_db()
    assert endpoint.consecutive_failures == 0


def test_an_endpoint_is_disabled_only_when_it_fails_after_failing_for_the_window(analyst, endpoint, receiver,
                                                                                    settings):
    settings.ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS = 3600
    settings.ARBITER_WEBHOOK_MAX_ATTEMPTS = 2
    receiver.statuses = [500] * 5
    make_case(actor=analyst)
    delivery = WebhookDelivery.objects.get()
    before = timezone.now()
    webhook_deliver(delivery_id=delivery.pk)
    endpoint.refresh_from_db()
    assert endpoint.is_active and endpoint.failing_since >= before and endpoint.consecutive_failures == 1
    _due_now()
    second = webhook_deliver(delivery_id=delivery.pk)  # attempts used up, but the receiver fails everything
    endpoint.refresh_from_db()
    assert endpoint.is_active and second.status == DeliveryStatus.PENDING and second.attempts == 2
    # The streak is older than the window: the next failure disables it, and the delivery waits.
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(failing_since=timezone.now() - timedelta(seconds=3601))
    _due_now()
    third = webhook_deliver(delivery_id=delivery.pk)
    endpoint.refresh_from_db()
    assert endpoint.is_active is False and "failed continuously for more than 1 hour" in endpoint.disabled_reason
    assert third.status == DeliveryStatus.PENDING
    make_case(actor=analyst, title="after disabling")
    assert WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).count() == 2  # queued, not dropped
    _due_now()
    assert webhook_deliver(delivery_id=delivery.pk) is None  # not attempted while disabled
    assert len(receiver.received()) == 3


def test_a_success_ends_the_streak_and_an_event_the_receiver_refuses_alone_is_given_up(analyst, endpoint,
                                                                                        receiver, settings):
    settings.ARBITER_WEBHOOK_MAX_ATTEMPTS = 2
    receiver.statuses = [500, 200, 500]
    make_case(actor=analyst)
    first = WebhookDelivery.objects.get()
    webhook_deliver(delivery_id=first.pk)  # fails: the streak begins
    make_case(actor=analyst, title="second")
    second = WebhookDelivery.objects.exclude(pk=first.pk).get()
    assert webhook_deliver(delivery_id=second.pk).status == DeliveryStatus.SUCCEEDED
    endpoint.refresh_from_db()
    assert (endpoint.failing_since, endpoint.consecutive_failures) == (None, 0)
    _due_now()
    # Its second failure, right after a success: the receiver works and refuses this one; given up.
    assert webhook_deliver(delivery_id=first.pk).status == DeliveryStatus.FAILED


def test_backoff_doubles_up_to_its_maximum(analyst, endpoint, receiver, settings):
    settings.ARBITER_WEBHOOK_BACKOFF_SECONDS, settings.ARBITER_WEBHOOK_BACKOFF_MAX_SECONDS = 30, 100
    receiver.statuses = [500] * 4
    make_case(actor=analyst)
    delivery = WebhookDelivery.objects.get()
    for wait in (30, 60, 100, 100):
        _due_now()
        # The service reads the clock after the attempt, which takes its own time on a loaded
        # machine: the next attempt is `wait` seconds after some moment between these two.
        before = timezone.now()
        attempted = webhook_deliver(delivery_id=delivery.pk)
        after = timezone.now()
        assert before + timedelta(seconds=wait) <= attempted.next_attempt_at <= after + timedelta(seconds=wait)


def test_an_unreachable_receiver_is_a_logged_failure(analyst, supervisor, local_receivers_allowed):
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url="http://127.0.0.1:9/nothing",
                                          event_types=["case.changed"])
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert delivery.status == DeliveryStatus.PENDING and delivery.last_status_code is None
    assert delivery.last_error_category == "connect"
    assert WebhookAttempt.objects.get().error_category == "connect"


def test_redeliver_through_the_api(api, analyst, supervisor, endpoint, receiver, settings, kicked,
                                   django_capture_on_commit_callbacks):
    settings.ARBITER_WEBHOOK_MAX_ATTEMPTS = 1
    receiver.statuses = [500]
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert delivery.status == DeliveryStatus.FAILED
    with assert_nothing_changed():
        assert_error(api(analyst).post(f"/api/v1/webhook-deliveries/{delivery.pk}/redeliver/"), 403, "forbidden")
    with django_capture_on_commit_callbacks(execute=True):
        response = api(supervisor).post(f"/api/v1/webhook-deliveries/{delivery.pk}/redeliver/")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    assert kicked == [delivery.pk]
    assert webhook_deliver(delivery_id=delivery.pk).status == DeliveryStatus.SUCCEEDED
    log = api(supervisor).get(f"/api/v1/webhooks/{endpoint.pk}/deliveries/").json()["results"][0]["attempt_log"]
    assert [(a["number"], a["status_code"]) for a in log] == [(1, 500), (2, 200)]
    assert api(supervisor).post(f"/api/v1/webhook-deliveries/{delivery.pk}/redeliver/").status_code == 202
    with assert_nothing_changed():  # already queued again
        assert_error(api(supervisor).post(f"/api/v1/webhook-deliveries/{delivery.pk}/redeliver/"), 409,
                     "not_allowed")


@pytest.mark.django_db(transaction=True)
def test_no_event_is_lost_when_the_broker_is_down_at_commit(tenant, analyst, supervisor, receiver, monkeypatch):
    """The change commits while the broker refuses connections: the delivery row stays pending and
    the beat poll delivers it once the broker is back."""
    webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["case.changed"])

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to broker: Connection refused.")

    monkeypatch.setattr("integrations.tasks.webhook_deliver_task.delay", broker_down)
    case = make_case(actor=analyst)  # commits (transaction=True): on_commit tries the broker and fails
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.PENDING and receiver.received() == []
    assert webhook_deliver_due_task() == 1  # beat, once things run again
    request = receiver.next()
    assert json.loads(request["body"])["data"]["case"] == case.reference
    assert WebhookDelivery.objects.get().status == DeliveryStatus.SUCCEEDED


def test_a_delivery_claimed_twice_is_sent_once(analyst, endpoint, receiver):
    make_case(actor=analyst)
    delivery_id = WebhookDelivery.objects.get().pk
    assert webhook_deliver(delivery_id=delivery_id) is not None
    assert webhook_deliver(delivery_id=delivery_id) is None
    assert len(receiver.received()) == 1


# --- the feed ---------------------------------------------------------------------------------------

def test_the_feed_serves_the_same_events_in_commit_order(api, analyst, supervisor, outsider):
    first = make_case(actor=analyst, title="one")
    make_case(actor=analyst, title="two")
    client = api(analyst)
    page = client.get("/api/v1/events/").json()
    assert [e["data"]["case"] for e in page["results"]][:1] == [first.reference]
    # Each case: case.created, then evidence.added (the complaint's text is its first evidence).
    assert [e["type"] for e in page["results"]] == ["case.created", "evidence.added"] * 2
    assert [e["sequence"] for e in page["results"]] == [1, 2, 3, 4] and page["next_after"] == 4
    assert client.get("/api/v1/events/?after=4").json() == {"results": [], "next_after": 4}
    assert api(outsider).get("/api/v1/events/").json()["results"] == []
    assert_error(client.get("/api/v1/events/?after=-1"), 400, "invalid", fields={"after"})
    assert_error(client.get("/api/v1/events/?type=nope"), 400, "invalid", fields={"type"})


def test_an_event_that_commits_late_is_not_skipped_by_a_poller(api, analyst):
    """Sequences follow commit order, not id order: an event with a lower id that becomes visible
    after a later one was served still comes after the poller's cursor."""
    make_case(actor=analyst, title="its transaction commits late")
    make_case(actor=analyst, title="commits first")
    low = IntegrationEvent.objects.order_by("id").first()
    kept = {field: getattr(low, field) for field in ("pk", "tenant_id", "type", "audit_event_id", "data",
                                                     "occurred_at")}
    low.delete()  # not yet visible (its transaction is still open)
    client = api(analyst)
    served = client.get("/api/v1/events/").json()
    assert len(served["results"]) == 3 and served["next_after"] == 3  # each case: case.created, evidence.added
    IntegrationEvent.objects.create(**kept)  # now it commits, with the lower id
    after = client.get(f"/api/v1/events/?after={served['next_after']}").json()["results"]
    assert [(e["id"], e["sequence"]) for e in after] == [(f"evt_{kept['pk']}", 4)]


def test_webhooks_are_managed_by_supervisors_and_admins(api, analyst, supervisor, receiver, settings):
    with assert_nothing_changed(extra={"endpoints": WebhookEndpoint.objects.count}):
        assert_error(api(analyst).post("/api/v1/webhooks/", {"url": receiver.url, "event_types": ["case.changed"]},
                                       format="json"), 403, "forbidden")
        assert_error(api(analyst).get("/api/v1/webhooks/"), 403, "forbidden")
    response = api(supervisor).post("/api/v1/webhooks/", {"url": receiver.url, "event_types": ["case.changed"]},
                                    format="json")
    assert response.status_code == 201 and response.json()["secret"].startswith("whsec_")
    assert response["Location"] == f"/api/v1/webhooks/{response.json()['id']}/"
    assert "secret" not in api(supervisor).get(response["Location"]).json()
    settings.ARBITER_WEBHOOK_ALLOW_HTTP = False
    with assert_nothing_changed(extra={"endpoints": WebhookEndpoint.objects.count}):
        assert_error(api(supervisor).post("/api/v1/webhooks/", {"url": receiver.url, "event_types": ["case.changed"]},
                                          format="json"), 400, "invalid", fields={"url"})
    with pytest.raises(Forbidden):
        webhook_endpoint_create(actor=analyst, url="https://x.example", event_types=["case.changed"])
    disabled = api(supervisor).patch(response["Location"], {"is_active": False}, format="json").json()
    assert disabled["is_active"] is False and disabled["disabled_at"]


def test_proposal_and_notice_events_are_typed(analyst, supervisor, case, endpoint):
    proposal = case_services.proposal_create(actor=analyst, case=case, kind="risk_level",
                                             payload={"risk_level": "high"}, rationale="r")
    case_services.proposal_reject(actor=supervisor, proposal=proposal, note="no")
    types = list(IntegrationEvent.objects.order_by("id").values_list("type", flat=True))
    assert types[-2:] == ["proposal.created", "proposal.rejected"]
    assert IntegrationEvent.objects.order_by("id").last().data["object_url"] == f"/api/v1/proposals/{proposal.pk}/"


def test_the_admin_registers_an_endpoint_shows_the_secret_once_and_redelivers(client, admin_user, analyst, receiver,
                                                                              settings):
    client.force_login(admin_user)
    response = client.post("/admin/integrations/webhookendpoint/add/", {
        "url": receiver.url, "description": "CRM", "event_types": ["case.changed"]}, follow=True)
    assert response.status_code == 200
    endpoint = WebhookEndpoint.objects.get()
    assert any(endpoint.secret in str(m) for m in response.context["messages"])
    assert endpoint.tenant_id == admin_user.tenant_id and endpoint.created_by == admin_user
    settings.ARBITER_WEBHOOK_MAX_ATTEMPTS = 1
    receiver.statuses = [500]
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert delivery.status == DeliveryStatus.FAILED
    client.post("/admin/integrations/webhookdelivery/", {"action": "redeliver", "_selected_action": [delivery.pk]})
    assert WebhookDelivery.objects.get().status == DeliveryStatus.PENDING
    client.post("/admin/integrations/webhookendpoint/", {"action": "disable", "_selected_action": [endpoint.pk]})
    assert WebhookEndpoint.objects.get().is_active is False
    assert client.get(f"/admin/integrations/webhookdelivery/{delivery.pk}/change/").status_code == 200
