"""capture_many (the audit listener for a batch) writes what capture writes for each event."""

from __future__ import annotations

import pytest
from django.db import transaction

from audit.services import audit_record_many
from integrations.models import IntegrationEvent, WebhookDelivery, WebhookEndpoint
from tests.factories import make_case

pytestmark = pytest.mark.django_db


def test_a_batch_gets_one_integration_event_per_interesting_event_and_deliveries_for_subscribers(
        analyst, tenant, other_tenant):
    case = make_case(actor=analyst)
    subscribed = WebhookEndpoint.objects.create(tenant=tenant, url="https://hooks.example.org/a", secret="s",
                                                event_types=["case.changed"], is_active=True)
    WebhookEndpoint.objects.create(tenant=tenant, url="https://hooks.example.org/b", secret="s", event_types=["notice.sent"],
                                   is_active=True)
    WebhookEndpoint.objects.create(tenant=other_tenant, url="https://hooks.example.org/c", secret="s",
                                   event_types=["case.changed"], is_active=True)
    before = IntegrationEvent.objects.count()
    common = {"tenant_id": tenant.pk, "actor_type": "system", "actor_id": "system:test"}
    with transaction.atomic():
        written = audit_record_many([
            {**common, "case_id": case.pk, "action": "cases.case.created", "target_type": "case", "target_id": case.pk},
            {**common, "action": "tests.nobody.listens"},
        ])
    created = IntegrationEvent.objects.order_by("pk")[before:]
    assert [(e.type, e.audit_event_id, e.data["case"]) for e in created] == [
        ("case.created", written[0].pk, case.reference)]  # a case.changed subscription receives it
    assert list(WebhookDelivery.objects.filter(event__in=created).values_list("endpoint_id", flat=True)) == [
        subscribed.pk]
