"""audit_record_many: many events in one go, chained exactly as audit_record chains them."""

from __future__ import annotations

import pytest
from django.db import transaction

from audit.models import AuditEvent, AuditStreamHead
from audit.services import (
    AuditHeadMoved,
    audit_append_built,
    audit_event_build,
    audit_record,
    audit_record_many,
)
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


def built(tenant, stream: str, sequence: int, prev_hash: str, number: int):
    fields = {key: value for key, value in event(tenant, number).items() if key != "case_id"}
    return audit_event_build(stream=stream, sequence=sequence, prev_hash=prev_hash, **fields)


def test_events_built_ahead_are_appended_when_their_heads_have_not_moved(tenant):
    first = built(tenant, "case:21", 1, "", 1)
    second = built(tenant, "case:21", 2, first.hash, 2)
    with transaction.atomic():
        audit_append_built([first, second, built(tenant, "case:22", 1, "", 3)])
    assert AuditStreamHead.objects.get(stream="case:21").last_hash == second.hash
    assert list(AuditEvent.objects.filter(stream="case:21").values_list("sequence", "hash")) == [
        (1, first.hash), (2, second.hash)]
    with transaction.atomic():  # the ordinary writer continues the chain
        after = audit_record(**event(tenant, 4, case_id=21))
    assert (after.sequence, after.prev_hash) == (3, second.hash)
    assert "OK" in verify()


def test_events_built_on_a_head_that_moved_are_refused_and_nothing_is_written(tenant):
    with transaction.atomic():
        audit_record(**event(tenant, 0, case_id=31))
    stale = [built(tenant, "case:32", 1, "", 1), built(tenant, "case:31", 1, "", 2)]
    with pytest.raises(AuditHeadMoved, match="case:31"), transaction.atomic():
        audit_append_built(stale)
    assert not AuditEvent.objects.filter(stream="case:32").exists()
    assert AuditEvent.objects.filter(stream="case:31").count() == 1
    assert "OK" in verify()
