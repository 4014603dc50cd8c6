"""Integration events, derived from the audit ledger in the transaction of the change (ADR 0009).

`capture` is registered with audit.hooks in IntegrationsConfig.ready: every audit event whose
action integrations care about becomes one IntegrationEvent and one WebhookDelivery per subscribed
endpoint of the tenant (a disabled one's waits until it is enabled; a deleted one gets none), all
in the transaction that records the change — committed with it or rolled back with it. After
commit the deliveries are kicked to Celery; if the broker is down the rows wait for the beat poll
(webhook_deliver_due_task). Nothing is lost in between.

The feed (`GET /api/v1/events/?after=`) pages by `feed_sequence`, given by `feed_assign` after
commit and in commit order, so a poller never skips an event whose transaction committed after a
later-numbered one."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from cases.models import Case
from core.bulk import copy_rows, insert_rows, reserve_id_values
from core.hashing import canonical_json
from core.slots import Slot
from integrations.catalogue import event_type_for, is_subscribed
from integrations.models import (
    EventType,
    FeedCounter,
    IntegrationEvent,
    WebhookDelivery,
    WebhookEndpoint,
)

logger = logging.getLogger(__name__)
# The Celery task that sends one delivery (integrations.tasks, which imports this module), filled
# in IntegrationsConfig.ready().
DELIVERY_TASK = Slot("the webhook delivery task (integrations.tasks.webhook_deliver_task)")

_OBJECT_URLS = {"case": "/api/v1/cases/{reference}/", "proposal": "/api/v1/proposals/{id}/",
                "notice": "/api/v1/notices/{id}/", "run": "/api/v1/runs/{id}/", "agentrun": "/api/v1/runs/{id}/",
                "evidence": "/api/v1/evidence/{id}/download/"}


def _case_reference(audit_event) -> str | None:
    if not audit_event.stream.startswith("case:"):
        return None
    return Case.objects.filter(pk=int(audit_event.stream.split(":", 1)[1])).values_list("reference", flat=True) \
        .first()


_NO_REFERENCE = object()


def event_data(audit_event, reference=_NO_REFERENCE) -> dict:
    if reference is _NO_REFERENCE:
        reference = _case_reference(audit_event)
    run_id = int(audit_event.run_id) if audit_event.run_id.isdigit() else None
    url_template = _OBJECT_URLS.get(audit_event.target_type)
    object_url = None
    if url_template and audit_event.target_id:
        object_url = url_template.format(id=audit_event.target_id, reference=reference or audit_event.target_id)
    return {"action": audit_event.action, "actor": audit_event.actor_id, "decision": audit_event.decision,
            "target_type": audit_event.target_type, "target_id": audit_event.target_id, "case": reference,
            "run_id": run_id, "object_url": object_url, "audit_event_id": audit_event.pk}


def capture(audit_event) -> IntegrationEvent | None:
    """The audit hook: runs inside the transaction of the change (audit_record refuses otherwise)."""
    if audit_event.tenant_id is None:
        return None
    kind = event_type_for(audit_event.action)
    if kind is None:
        return None
    event = IntegrationEvent.objects.create(tenant_id=audit_event.tenant_id, type=kind, audit_event=audit_event,
                                            data=event_data(audit_event), occurred_at=audit_event.created_at)
    now = timezone.now()
    # A disabled endpoint's events are queued too (ADR 0027): sent when it is enabled again.
    endpoints = [endpoint for endpoint in WebhookEndpoint.objects.filter(tenant_id=audit_event.tenant_id,
                                                                         deleted_at__isnull=True)
                 if is_subscribed(kind, endpoint.event_types or [])]
    if endpoints:
        deliveries = WebhookDelivery.objects.bulk_create(
            [WebhookDelivery(endpoint=endpoint, event=event, next_attempt_at=now) for endpoint in endpoints])
        ids = [delivery.pk for delivery in deliveries if delivery.endpoint.is_active]
        if ids:
            transaction.on_commit(lambda: kick_deliveries(ids))
    return event


def capture_many(audit_events: list) -> int:
    """capture for a batch (audit_record_many): the same rows in the same order, with one query for
    the case references, one for the endpoints and one insert for the events and for the deliveries.
    On PostgreSQL the events are COPYed as plain rows (no model instance per event). Returns how
    many integration events were written."""
    wanted = [(event, event_type_for(event.action)) for event in audit_events if event.tenant_id is not None]
    wanted = [(event, kind) for event, kind in wanted if kind is not None]
    if not wanted:
        return 0
    case_ids = {int(event.stream.split(":", 1)[1]) for event, _ in wanted if event.stream.startswith("case:")}
    references = dict(Case.objects.filter(pk__in=case_ids).values_list("pk", "reference")) if case_ids else {}
    written = _insert_events(wanted, references)  # (id, tenant id, type) of each event, in order
    # As capture: a disabled endpoint's deliveries are queued (sent once it is enabled), a deleted one gets none.
    endpoints = list(WebhookEndpoint.objects.filter(tenant_id__in={tenant_id for _, tenant_id, _ in written},
                                                    deleted_at__isnull=True))
    now = timezone.now()
    deliveries = [WebhookDelivery(endpoint=endpoint, event_id=event_id, next_attempt_at=now)
                  for event_id, tenant_id, kind in written for endpoint in endpoints
                  if endpoint.tenant_id == tenant_id and is_subscribed(kind, endpoint.event_types or [])]
    if deliveries:
        ids = [delivery.pk for delivery in WebhookDelivery.objects.bulk_create(deliveries) if delivery.endpoint.is_active]
        transaction.on_commit(lambda: kick_deliveries(ids))
    return len(written)


_EVENT_COLUMNS = ("id", "tenant_id", "type", "audit_event_id", "data", "occurred_at")


def _insert_events(wanted: list, references: dict[int, str]) -> list[tuple[int, int, str]]:
    """Insert the IntegrationEvent of each (audit event, type) of `wanted`; their (id, tenant id, type)."""
    def reference_of(event):
        return references.get(int(event.stream.split(":", 1)[1])) if event.stream.startswith("case:") else None

    connection = transaction.get_connection()
    if connection.vendor != "postgresql":
        rows = [IntegrationEvent(tenant_id=event.tenant_id, type=kind, audit_event=event,
                                 data=event_data(event, reference_of(event)), occurred_at=event.created_at)
                for event, kind in wanted]
        insert_rows(rows)
        return [(row.pk, row.tenant_id, row.type) for row in rows]
    ids = reserve_id_values(IntegrationEvent, len(wanted), using=connection.alias)
    # The data holds only strings, integers and None: canonical_json writes what DjangoJSONEncoder would.
    copy_rows(IntegrationEvent, _EVENT_COLUMNS,
              [(pk, event.tenant_id, kind, event.pk, canonical_json(event_data(event, reference_of(event))),
                event.created_at) for pk, (event, kind) in zip(ids, wanted, strict=True)], using=connection.alias)
    return [(pk, event.tenant_id, kind) for pk, (event, kind) in zip(ids, wanted, strict=True)]


def kick_deliveries(delivery_ids: list[int]) -> None:
    """Hand deliveries to Celery after commit. A broker outage only delays them: the rows are the
    durable intent and the beat poll finds them (webhook_deliver_due_task)."""
    task = DELIVERY_TASK.get()
    for delivery_id in delivery_ids:
        try:
            task.delay(delivery_id)
        except Exception:  # the broker is down: beat will find the row
            logger.warning("webhook delivery %s not queued (broker unavailable); the beat poll will send it",
                           delivery_id, exc_info=True)


def feed_assign(*, batch: int = 1000) -> int:
    """Give feed sequences to committed events that have none, in id order, under a row lock. A
    `ping` never gets one: it goes to one endpoint and is not in the feed.

    Only committed rows are visible here, so an event whose transaction commits late gets a later
    sequence than everything already served: a poller reading `after=<last sequence>` cannot skip it."""
    with transaction.atomic():
        FeedCounter.objects.bulk_create([FeedCounter(name="events")], ignore_conflicts=True)
        counter = FeedCounter.objects.select_for_update().get(name="events")
        pending = list(IntegrationEvent.objects.filter(feed_sequence__isnull=True).exclude(type=EventType.PING)
                       .order_by("id").values_list("id", flat=True)[:batch])
        for event_id in pending:
            counter.value += 1
            IntegrationEvent.objects.filter(pk=event_id).update(feed_sequence=counter.value)
        if pending:
            counter.save(update_fields=["value"])
    return len(pending)


def event_representation(event: IntegrationEvent, *, tenant_slug: str) -> dict:
    """The body of a webhook and an item of the feed: the same event either way."""
    return {"id": f"evt_{event.pk}", "sequence": event.feed_sequence, "type": event.type,
            "occurred_at": event.occurred_at.isoformat().replace("+00:00", "Z"), "tenant": tenant_slug,
            "data": event.data}
