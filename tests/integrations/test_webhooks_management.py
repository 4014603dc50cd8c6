"""Managing webhook endpoints beyond create and change: redeliver every event since a time or an
event, rotate the secret with an overlap (both signatures meanwhile), ping, delete; and what
enabling a disabled endpoint again sends. Each refusal changes nothing."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from core.errors import Forbidden, NotFound
from integrations import webhook_delivery
from integrations.catalogue import types_matching
from integrations.events import feed_assign
from integrations.models import (
    DeliveryStatus,
    IntegrationEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from integrations.webhook_delivery import webhook_deliver, webhook_deliver_due
from integrations.webhooks import (
    verify_signature,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_ping,
    webhook_redeliver_since,
    webhook_secret_rotate,
)
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


def _webhook_state() -> dict:
    return {
        "deliveries": lambda: sorted(WebhookDelivery.objects.values_list("pk", "endpoint_id", "event_id", "status",
                                                                         "attempts", "next_attempt_at")),
        "endpoints": lambda: sorted(WebhookEndpoint.objects.values_list(
            "pk", "secret", "previous_secret", "previous_secret_expires_at", "is_active", "deleted_at",
            "failing_since")),
        "events": IntegrationEvent.objects.count,
    }


def _case_events(endpoint) -> list[int]:
    feed_assign()
    return list(IntegrationEvent.objects.filter(tenant_id=endpoint.tenant_id, type__in=_received_types(endpoint))
                .order_by("feed_sequence").values_list("pk", flat=True))


def _received_types(endpoint) -> list[str]:
    """The stored types the endpoint receives (a former umbrella type stands for the types it became)."""
    return [kind for subscribed in endpoint.event_types for kind in types_matching(subscribed)]


def _deliver_everything() -> None:
    while webhook_deliver_due():
        pass


# --- redeliver since -----------------------------------------------------------------------------------

def test_redeliver_since_a_time_queues_every_event_from_then_on(api, analyst, supervisor, endpoint, receiver, kicked,
                                                                django_capture_on_commit_callbacks):
    make_case(actor=analyst, title="before")
    since = timezone.now()
    make_case(actor=analyst, title="after one")
    make_case(actor=analyst, title="after two")
    _deliver_everything()
    receiver.received()
    wanted = list(IntegrationEvent.objects.filter(type__in=_received_types(endpoint), occurred_at__gte=since)
                  .order_by("feed_sequence").values_list("pk", flat=True))
    assert len(wanted) >= 2
    with django_capture_on_commit_callbacks(execute=True):
        response = api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/redeliver/", {"since": since.isoformat()},
                                        format="json", HTTP_IDEMPOTENCY_KEY="since-1")
    assert response.status_code == 202, response.content
    assert response.json() == {"events": len(wanted), "queued": len(wanted), "already_queued": 0}
    queued = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING)
    assert sorted(queued.values_list("event_id", flat=True)) == sorted(wanted)
    assert kicked == list(queued.order_by("event_id").values_list("pk", flat=True))  # oldest first
    audit = AuditEvent.objects.filter(action="integrations.webhook.redelivered_since").get()
    assert audit.payload["queued"] == len(wanted)
    # The same call with the same Idempotency-Key is answered again, and queues nothing more.
    with assert_nothing_changed(extra=_webhook_state()):
        again = api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/redeliver/", {"since": since.isoformat()},
                                     format="json", HTTP_IDEMPOTENCY_KEY="since-1")
    assert again.status_code == 202 and again["Idempotent-Replayed"] == "true"
    _deliver_everything()
    assert sorted(int(json.loads(r["body"])["id"][4:]) for r in receiver.received()) == sorted(wanted)


def test_redeliver_since_an_event_includes_it_and_creates_deliveries_the_endpoint_never_had(
        api, analyst, supervisor, receiver, kicked):
    make_case(actor=analyst, title="one")
    make_case(actor=analyst, title="two")
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["case.changed"])
    events = _case_events(endpoint)
    assert len(events) >= 2 and WebhookDelivery.objects.count() == 0  # registered after them
    response = api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/redeliver/",
                                    {"since_event": f"evt_{events[1]}"}, format="json")
    assert response.status_code == 202 and response.json()["queued"] == len(events) - 1
    assert set(WebhookDelivery.objects.values_list("event_id", flat=True)) == set(events[1:])
    # A feed sequence works too; what is already queued is left as it is.
    first = IntegrationEvent.objects.get(pk=events[0]).feed_sequence
    response = api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/redeliver/", {"since_event": first},
                                    format="json")
    assert response.json() == {"events": len(events), "queued": 1, "already_queued": len(events) - 1}


def test_redeliver_since_to_a_disabled_endpoint_queues_without_sending(analyst, supervisor, endpoint, receiver,
                                                                       kicked, django_capture_on_commit_callbacks):
    since = timezone.now()
    make_case(actor=analyst)
    _deliver_everything()
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
    endpoint.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        counts = webhook_redeliver_since(actor=supervisor, endpoint=endpoint, since=since)
    assert counts["queued"] >= 1 and kicked == [] and webhook_deliver_due() == 0


def test_redeliver_since_refusals_change_nothing(api, analyst, supervisor, outsider, endpoint, receiver, settings,
                                                 other_tenant):
    make_case(actor=analyst, title="one")
    make_case(actor=analyst, title="two")
    _deliver_everything()
    make_case(actor=outsider, title="theirs")
    foreign_event = IntegrationEvent.objects.filter(tenant=other_tenant).first()
    assert foreign_event is not None
    url = f"/api/v1/webhooks/{endpoint.pk}/redeliver/"
    client = api(supervisor)
    settings.ARBITER_WEBHOOK_REDELIVER_MAX = 1
    with assert_nothing_changed(extra=_webhook_state()):
        assert_error(client.post(url, {}, format="json"), 400, "invalid", fields={"since", "since_event"})
        assert_error(client.post(url, {"since": "2026-01-01T00:00:00Z", "since_event": "evt_1"}, format="json"),
                     400, "invalid", fields={"since", "since_event"})
        assert_error(client.post(url, {"since": "yesterday"}, format="json"), 400, "invalid", fields={"since"})
        future = (timezone.now() + timedelta(hours=1)).isoformat()
        assert_error(client.post(url, {"since": future}, format="json"), 400, "invalid", fields={"since"})
        assert_error(client.post(url, {"since_event": "evt_999999"}, format="json"), 400, "invalid",
                     fields={"since_event"})
        assert_error(client.post(url, {"since_event": f"evt_{foreign_event.pk}"}, format="json"), 400, "invalid",
                     fields={"since_event"})
        assert_error(client.post(url, {"since_event": "the last one"}, format="json"), 400, "invalid",
                     fields={"since_event"})
        too_many = assert_error(client.post(url, {"since": "2000-01-01T00:00:00Z"}, format="json"), 400, "invalid",
                                fields={"since"})
        assert "(at most 1)" in too_many["detail"] and "later point" in too_many["fields"]["since"][0]
        assert_error(client.post(url, {"since": "2000-01-01T00:00:00Z", "extra": 1}, format="json"), 400, "invalid")
        assert_error(api(analyst).post(url, {"since": "2000-01-01T00:00:00Z"}, format="json"), 403, "forbidden")
        assert_error(api(outsider).post(url, {"since": "2000-01-01T00:00:00Z"}, format="json"), 404, "not_found")
        assert_error(client.post("/api/v1/webhooks/999999/redeliver/", {"since": "2000-01-01T00:00:00Z"},
                                 format="json"), 404, "not_found")
        with pytest.raises(Forbidden):
            webhook_redeliver_since(actor=analyst, endpoint=endpoint, since=timezone.now())


def test_another_tenants_endpoint_does_not_exist(api, supervisor, outsider, receiver):
    theirs, _ = webhook_endpoint_create(actor=outsider, url=receiver.url, event_types=["case.changed"])
    client = api(supervisor)
    with assert_nothing_changed(extra=_webhook_state()):
        for path in ("redeliver/", "rotate-secret/", "ping/"):
            body = {"since": "2000-01-01T00:00:00Z"} if path == "redeliver/" else None
            assert_error(client.post(f"/api/v1/webhooks/{theirs.pk}/{path}", body, format="json"), 404, "not_found")
        assert_error(client.delete(f"/api/v1/webhooks/{theirs.pk}/"), 404, "not_found")
        for service in (webhook_secret_rotate, webhook_ping, webhook_endpoint_delete):
            with pytest.raises(NotFound):
                service(actor=supervisor, endpoint=theirs)


# --- rotating the secret ----------------------------------------------------------------------------------

def test_a_rotated_secret_signs_with_both_during_the_overlap_then_with_the_new_one(api, analyst, supervisor,
                                                                                   endpoint, receiver, settings):
    settings.ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS = 3600
    old = endpoint.plain_secret
    response = api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/rotate-secret/")
    assert response.status_code == 200, response.content
    new = response.json()["secret"]
    assert new.startswith("whsec_") and new != old and response.json()["previous_secret_expires_at"]
    assert "secret" not in api(supervisor).get(f"/api/v1/webhooks/{endpoint.pk}/").json()
    audit = AuditEvent.objects.get(action="integrations.webhook.secret_rotated")
    assert new not in json.dumps(audit.payload) and old not in json.dumps(audit.payload)
    make_case(actor=analyst)
    _deliver_everything()
    request = receiver.received()[0]
    header = request["headers"]["Arbiter-Signature"]
    assert header.count("v1=") == 2
    for secret in (new, old):  # a receiver holding either secret accepts it
        assert verify_signature(secret=secret, header=header, body=request["body"], tolerance_seconds=300)
    assert not verify_signature(secret="whsec_other", header=header, body=request["body"], tolerance_seconds=300)
    # After the overlap only the new secret signs.
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(previous_secret_expires_at=timezone.now())
    make_case(actor=analyst, title="later")
    _deliver_everything()
    request = receiver.received()[0]
    header = request["headers"]["Arbiter-Signature"]
    assert header.count("v1=") == 1
    assert verify_signature(secret=new, header=header, body=request["body"], tolerance_seconds=300)
    assert not verify_signature(secret=old, header=header, body=request["body"], tolerance_seconds=300)


def test_rotating_without_overlap_and_its_refusals(api, analyst, supervisor, endpoint, settings):
    settings.ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS = 0
    with assert_nothing_changed(extra=_webhook_state()):
        assert_error(api(analyst).post(f"/api/v1/webhooks/{endpoint.pk}/rotate-secret/"), 403, "forbidden")
        assert_error(api(supervisor).post("/api/v1/webhooks/999999/rotate-secret/"), 404, "not_found")
        with pytest.raises(Forbidden):
            webhook_secret_rotate(actor=analyst, endpoint=endpoint)
    rotated, secret = webhook_secret_rotate(actor=supervisor, endpoint=endpoint)
    assert (rotated.secret, rotated.previous_secret, rotated.previous_secret_expires_at) == (secret, "", None)


# --- ping ---------------------------------------------------------------------------------------------------

def test_a_ping_goes_to_that_endpoint_only_and_not_to_the_feed(api, analyst, supervisor, endpoint, receiver, kicked,
                                                               django_capture_on_commit_callbacks):
    other, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["case.changed"])
    with django_capture_on_commit_callbacks(execute=True):
        response = api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/ping/")
    assert response.status_code == 202 and response.json()["event_type"] == "ping"
    delivery = WebhookDelivery.objects.get()
    assert delivery.endpoint_id == endpoint.pk and kicked == [delivery.pk]
    assert webhook_deliver(delivery_id=delivery.pk).status == DeliveryStatus.SUCCEEDED
    request = receiver.next()
    body = json.loads(request["body"])
    assert (body["type"], body["sequence"], request["headers"]["Arbiter-Event-Type"]) == ("ping", None, "ping")
    assert verify_signature(secret=endpoint.plain_secret, header=request["headers"]["Arbiter-Signature"],
                            body=request["body"], tolerance_seconds=300)
    feed_assign()
    assert IntegrationEvent.objects.get(type="ping").feed_sequence is None
    assert all(e["type"] != "ping" for e in api(supervisor).get("/api/v1/events/").json()["results"])
    assert not WebhookDelivery.objects.filter(endpoint=other).exists()


def test_ping_refusals_change_nothing(api, analyst, supervisor, endpoint):
    with assert_nothing_changed(extra=_webhook_state()):
        assert_error(api(analyst).post(f"/api/v1/webhooks/{endpoint.pk}/ping/"), 403, "forbidden")
        assert_error(api(supervisor).post("/api/v1/webhooks/999999/ping/"), 404, "not_found")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
    with assert_nothing_changed(extra=_webhook_state()):
        refused = assert_error(api(supervisor).post(f"/api/v1/webhooks/{endpoint.pk}/ping/"), 409, "not_allowed")
    assert "Enable it first" in refused["detail"]
    with assert_nothing_changed(extra=_webhook_state()):
        assert_error(api(supervisor).post("/api/v1/webhooks/", {"url": "https://x.example", "event_types": ["ping"]},
                                          format="json"), 400, "invalid", fields={"event_types"})


# --- delete -------------------------------------------------------------------------------------------------

def test_deleting_an_endpoint_cancels_its_queue_keeps_its_log_and_stops_its_deliveries(api, analyst, supervisor,
                                                                                      endpoint, receiver):
    receiver.statuses = [500]
    make_case(actor=analyst, title="attempted")
    webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)  # fails: pending, with an attempt logged
    make_case(actor=analyst, title="queued")
    pending = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).count()
    assert pending == 2
    response = api(supervisor).delete(f"/api/v1/webhooks/{endpoint.pk}/")
    assert response.status_code == 204, response.content
    endpoint.refresh_from_db()
    assert endpoint.deleted_at and not endpoint.is_active and endpoint.secret == ""
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {DeliveryStatus.CANCELLED}
    assert WebhookAttempt.objects.count() == 1  # the log is kept
    audit = AuditEvent.objects.get(action="integrations.webhook.deleted")
    assert audit.payload["cancelled"] == 2 and audit.payload["url"] == receiver.url
    make_case(actor=analyst, title="after deleting")
    assert WebhookDelivery.objects.count() == 2 and webhook_deliver_due() == 0
    client = api(supervisor)
    with assert_nothing_changed(extra=_webhook_state()):
        assert_error(client.get(f"/api/v1/webhooks/{endpoint.pk}/"), 404, "not_found")
        assert_error(client.delete(f"/api/v1/webhooks/{endpoint.pk}/"), 404, "not_found")
        assert_error(client.patch(f"/api/v1/webhooks/{endpoint.pk}/", {"is_active": True}, format="json"), 404,
                     "not_found")
        delivery = WebhookDelivery.objects.first()
        assert_error(client.post(f"/api/v1/webhook-deliveries/{delivery.pk}/redeliver/"), 404, "not_found")
    assert client.get("/api/v1/webhooks/").json()["results"] == []


def test_delete_refusals_change_nothing(api, analyst, supervisor, endpoint):
    with assert_nothing_changed(extra=_webhook_state()):
        assert_error(api(analyst).delete(f"/api/v1/webhooks/{endpoint.pk}/"), 403, "forbidden")
        assert_error(api(supervisor).delete("/api/v1/webhooks/999999/"), 404, "not_found")
        assert_error(api(supervisor).delete(f"/api/v1/webhooks/{endpoint.pk}/", HTTP_IF_MATCH='"webhook-0-stale"'),
                     412, "precondition_failed")
        with pytest.raises(Forbidden):
            webhook_endpoint_delete(actor=analyst, endpoint=endpoint)


def test_the_admin_deletes_endpoints_through_the_service(client, admin_user, endpoint):
    client.force_login(admin_user)
    response = client.post("/admin/integrations/webhookendpoint/", {
        "action": "delete_endpoints", "_selected_action": [endpoint.pk]}, follow=True)
    assert response.status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.deleted_at is not None
    assert AuditEvent.objects.filter(action="integrations.webhook.deleted").count() == 1
    listing = client.get("/admin/integrations/webhookendpoint/")
    assert endpoint.url not in listing.content.decode()


# --- disabled, then enabled again ------------------------------------------------------------------------------

def test_enabling_again_sends_what_was_queued_oldest_first(api, analyst, supervisor, endpoint, receiver, kicked,
                                                           django_capture_on_commit_callbacks):
    receiver.statuses = [500]
    make_case(actor=analyst, title="failing before")
    retried = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert retried.status == DeliveryStatus.PENDING and retried.attempts == 1  # a retry waiting
    api(supervisor).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"is_active": False}, format="json")
    WebhookDelivery.objects.filter(pk=retried.pk).update(next_attempt_at=timezone.now())
    assert webhook_deliver(delivery_id=retried.pk) is None  # not attempted, and not failed at once
    assert WebhookDelivery.objects.get(pk=retried.pk).status == DeliveryStatus.PENDING
    make_case(actor=analyst, title="while disabled one")
    make_case(actor=analyst, title="while disabled two")
    queued = list(WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).order_by("event_id")
                  .values_list("pk", flat=True))
    assert len(queued) >= 3 and webhook_deliver_due() == 0 and kicked == []
    with django_capture_on_commit_callbacks(execute=True):
        enabled = api(supervisor).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"is_active": True}, format="json")
    assert enabled.json()["is_active"] is True and enabled.json()["failing_since"] is None
    assert kicked == queued
    _deliver_everything()
    received = [int(json.loads(r["body"])["id"][4:]) for r in receiver.received()]
    expected = list(WebhookDelivery.objects.filter(pk__in=queued).order_by("event_id").values_list("event_id",
                                                                                                    flat=True))
    assert received[1:] == expected  # after the first failed attempt: every queued event, oldest first


def test_a_delivery_under_way_when_its_endpoint_is_deleted_is_logged_and_cancelled(analyst, supervisor, endpoint,
                                                                                 receiver, monkeypatch):
    receiver.statuses = [500]
    make_case(actor=analyst)
    delivery = WebhookDelivery.objects.get()
    post = webhook_delivery._post

    def deleted_meanwhile(*args):
        outcome = post(*args)
        webhook_endpoint_delete(actor=supervisor, endpoint=endpoint)
        return outcome

    monkeypatch.setattr(webhook_delivery, "_post", deleted_meanwhile)
    attempted = webhook_deliver(delivery_id=delivery.pk)
    assert (attempted.status, attempted.attempts, attempted.last_status_code) == (DeliveryStatus.CANCELLED, 1, 500)
    assert WebhookAttempt.objects.filter(delivery=delivery).count() == 1


def test_a_claim_taken_just_before_the_endpoint_is_disabled_is_given_back(analyst, endpoint, receiver, monkeypatch):
    make_case(actor=analyst)
    delivery = WebhookDelivery.objects.get()
    claim = webhook_delivery._claim

    def disabled_right_after(delivery_id, now):
        claimed = claim(delivery_id, now)
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(is_active=False)
        return claimed

    monkeypatch.setattr(webhook_delivery, "_claim", disabled_right_after)
    assert webhook_deliver(delivery_id=delivery.pk) is None
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.locked_until) == (DeliveryStatus.PENDING, 0, None)
    assert receiver.received() == []
