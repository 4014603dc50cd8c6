"""Audit reads, scoped to a tenant id (this app imports nothing of ours; callers pass the user's
tenant and have checked the role)."""

from django.db.models import QuerySet

from audit.models import AuditEvent


def audit_events_for_tenant(*, tenant_id: int, case_id: int | None = None, run_id: str | None = None,
                            action: str | None = None) -> QuerySet[AuditEvent]:
    qs = AuditEvent.objects.filter(tenant_id=tenant_id)
    if case_id is not None:
        qs = qs.filter(stream=f"case:{case_id}")
    if run_id:
        qs = qs.filter(run_id=run_id)
    if action:
        qs = qs.filter(action__startswith=action)
    return qs.order_by("-created_at", "-id")
