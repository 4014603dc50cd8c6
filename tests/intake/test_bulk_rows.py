"""On PostgreSQL bulk intake writes its evidence, case events, audit records and integration events
as plain rows (COPY of tuples, each payload encoded once): the same rows and a verifying hash chain
as the model-instance path writes for the same cases."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import transaction
from django.forms.models import model_to_dict

from audit.models import AuditEvent
from cases.models import Case, CaseEvent, Evidence
from cases.services import bulk
from cases.services.bulk import NewCase, case_create_many
from core.actors import Actor
from integrations.models import IntegrationEvent
from tests.audit.tampering import verify

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

ACTOR = Actor.system("import_complaints")
SPECS = [
    NewCase(title="Late fee — Example Co", received_at=date(2024, 3, 4), narrative="Charged twice — «prêt» 🙂",
            fields={"product": "Mortgage", "company": "Example Co", "source": "cfpb", "source_reference": "1"}),
    NewCase(title="No narrative", received_at=date(2024, 3, 5), narrative="",
            fields={"product": "Credit card", "source": "cfpb", "source_reference": "2"}),
    NewCase(title="Another year", received_at=date(2025, 1, 2), narrative="Second narrative.\nTwo lines.",
            fields={"issue": "Fraud", "source": "cfpb", "source_reference": "3"}),
]


def written(tenant) -> dict:
    """What case_create_many wrote for `tenant`, its ids replaced by their position."""
    cases = list(Case.objects.filter(tenant=tenant).order_by("pk"))
    case_no = {case.pk: number for number, case in enumerate(cases)}
    evidence = list(Evidence.objects.filter(tenant=tenant).order_by("pk"))
    evidence_no = {item.pk: number for number, item in enumerate(evidence)}

    def plain(payload: dict) -> dict:
        return payload | ({"evidence_id": evidence_no[payload["evidence_id"]]} if "evidence_id" in payload else {})

    def strip(row: dict, *names: str) -> dict:
        return {key: value for key, value in row.items() if key not in {"id", "tenant", *names}}

    audits = list(AuditEvent.objects.filter(tenant=tenant).order_by("pk"))
    return {
        "cases": [strip(model_to_dict(case), "created_at", "updated_at") for case in cases],
        "evidence": [strip(model_to_dict(item), "case", "file") | {"case": case_no[item.case_id]} for item in evidence],
        "events": [(case_no[e.case_id], e.sequence, e.event_type, plain(e.payload), e.case_version, e.actor_type,
                    e.actor_id, e.run_id, e.policy_version)
                   for e in CaseEvent.objects.filter(tenant=tenant).order_by("pk")],
        "audits": [(e.sequence, e.action, e.actor_type, e.actor_id, e.target_type, plain(e.payload),
                    [evidence_no[ref] for ref in e.evidence_refs], e.key_id, bool(e.hash)) for e in audits],
        "integrations": [(e.type, {k: v for k, v in e.data.items() if k not in {"audit_event_id", "object_url", "target_id"}})
                         for e in IntegrationEvent.objects.filter(tenant=tenant).order_by("pk")],
    }


def test_plain_rows_are_the_rows_of_the_instance_path_and_the_chain_verifies(tenant, other_tenant, monkeypatch):
    with transaction.atomic():
        rows_cases = case_create_many(actor=ACTOR, tenant=tenant, new_cases=SPECS)
    monkeypatch.setattr(bulk, "_record_rows", bulk._record_instances)
    with transaction.atomic():
        case_create_many(actor=ACTOR, tenant=other_tenant, new_cases=SPECS)
    by_rows, by_instances = written(tenant), written(other_tenant)
    assert len(by_rows["audits"]) == 5 and len(by_rows["events"]) == 5 and len(by_rows["evidence"]) == 2
    assert by_rows == by_instances
    assert [case.pk for case in rows_cases] == list(Case.objects.filter(tenant=tenant).order_by("pk")
                                                    .values_list("pk", flat=True))
    for item in Evidence.objects.filter(tenant=tenant):
        event = AuditEvent.objects.get(action="cases.evidence.added", target_id=str(item.pk))
        assert event.stream == f"case:{item.case_id}" and event.evidence_refs == [item.pk]
    assert "OK" in verify()
