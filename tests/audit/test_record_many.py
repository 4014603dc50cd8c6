"""audit_record_many: many events in one go, chained exactly as audit_record chains them."""

from __future__ import annotations

import pytest
from django.db import transaction

from audit.models import AuditEvent, AuditStreamHead
from audit.services import audit_record, audit_record_many
from tests.audit.tampering import verify

pytestmark = pytest.mark.django_db


def event(tenant, number: int, case_id: int | None = None) -> dict:
    return {"tenant_id": tenant.pk, "case_id": case_id, "actor_type": "system", "actor_id": "system:test",
            "action": "tests.thing.done", "target_type": "thing", "target_id": number, "payload": {"n": number}}


def test_events_are_chained_per_stream_in_order_and_continue_existing_chains(tenant):
    with transaction.atomic():
        audit_record(**event(tenant, 0))
    with transaction.atomic():
        written = audit_record_many([event(tenant, 1, case_id=7), event(tenant, 2), event(tenant, 3, case_id=7),
                                     event(tenant, 4, case_id=8)])
    assert [(e.stream, e.sequence) for e in written] == [
        ("case:7", 1), (f"tenant:{tenant.pk}", 2), ("case:7", 2), ("case:8", 1)]
    assert written[2].prev_hash == written[0].hash
    assert written[1].prev_hash == AuditEvent.objects.get(stream=f"tenant:{tenant.pk}", sequence=1).hash
    heads = dict(AuditStreamHead.objects.values_list("stream", "last_sequence"))
    assert heads == {f"tenant:{tenant.pk}": 2, "case:7": 2, "case:8": 1}
    assert AuditStreamHead.objects.get(stream="case:7").last_hash == written[2].hash
    with transaction.atomic():  # the ordinary writer continues the chain the batch left
        after = audit_record(**event(tenant, 5, case_id=7))
    assert (after.sequence, after.prev_hash) == (3, written[2].hash)
    assert "OK" in verify()


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_run_outside_a_transaction(tenant):
    with pytest.raises(RuntimeError, match="inside the transaction"):
        audit_record_many([event(tenant, 1)])
    assert AuditEvent.objects.count() == 0
