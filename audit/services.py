"""The only write path into the audit ledger."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.hooks import run_after_record
from audit.models import AuditEvent, AuditStreamHead


def stream_for(*, tenant_id: int | None, case_id: int | None = None) -> str:
    """A case's events chain per case; events about no case chain per tenant (DESIGN §2)."""
    if case_id is not None:
        return f"case:{case_id}"
    return f"tenant:{tenant_id}" if tenant_id is not None else "global"


def audit_record(
    *,
    tenant_id: int | None,
    actor_type: str,
    actor_id: str,
    action: str,
    case_id: int | None = None,
    target_type: str = "",
    target_id: str | int = "",
    run_id: str = "",
    policy_version: str = "",
    decision: str = "",
    evidence_refs: list | None = None,
    payload: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to its stream's hash chain.

    Must run inside the transaction of the change it records (it refuses otherwise), so the
    event and the change commit or roll back together. The stream head row is locked, so
    concurrent writers to one stream queue briefly while different streams never contend."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record must be called inside the transaction of the change it records.")
    stream = stream_for(tenant_id=tenant_id, case_id=case_id)
    # INSERT ... ON CONFLICT DO NOTHING, then lock: two first writers to a new stream cannot both create it.
    AuditStreamHead.objects.bulk_create([AuditStreamHead(stream=stream)], ignore_conflicts=True)
    head = AuditStreamHead.objects.select_for_update().get(stream=stream)
    event = AuditEvent(
        tenant_id=tenant_id,
        stream=stream,
        sequence=head.last_sequence + 1,
        actor_type=actor_type,
        actor_id=actor_id,
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        run_id=str(run_id or ""),
        policy_version=policy_version,
        decision=decision,
        evidence_refs=list(evidence_refs or []),
        payload=dict(payload or {}),
        created_at=timezone.now(),
        prev_hash=head.last_hash,
    )
    # Round-trip through JSON now so the hash is computed over exactly what the database returns.
    event.evidence_refs = _json_roundtrip(event.evidence_refs)
    event.payload = _json_roundtrip(event.payload)
    event.hash = event.compute_hash()
    event.save(force_insert=True)
    head.last_sequence = event.sequence
    head.last_hash = event.hash
    head.save(update_fields=["last_sequence", "last_hash"])
    run_after_record(event)  # in this same transaction (audit/hooks.py; integrations: ADR 0009)
    return event


def _json_roundtrip(value):
    import json

    return json.loads(json.dumps(value, default=str))
