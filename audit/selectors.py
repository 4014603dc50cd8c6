"""Audit reads, scoped to a tenant id (this app imports nothing of ours; callers pass the user's
tenant and have checked the role)."""

from datetime import date, datetime, time, timedelta

from django.db.models import QuerySet
from django.utils import timezone

from audit.models import AuditEvent


def audit_events_for_tenant(*, tenant_id: int, case_id: int | None = None, run_id: str | None = None,
                            action: str | None = None, actor_id: str | None = None,
                            actor_type: str | None = None, decision: str | None = None,
                            date_from: date | None = None, date_to: date | None = None) -> QuerySet[AuditEvent]:
    """The tenant's audit events, newest first. `action` matches a prefix ("cases.notice");
    `actor_type` "user" keeps people's own actions (the decisions), leaving out agents' and the
    system's run plumbing; `date_from`/`date_to` are inclusive days in the current time zone."""
    qs = AuditEvent.objects.filter(tenant_id=tenant_id)
    if case_id is not None:
        qs = qs.filter(stream=f"case:{case_id}")
    if run_id:
        qs = qs.filter(run_id=run_id)
    if action:
        qs = qs.filter(action__startswith=action)
    if actor_id:
        qs = qs.filter(actor_id=actor_id)
    if actor_type:
        qs = qs.filter(actor_type=actor_type)
    if decision:
        qs = qs.filter(decision=decision)
    if date_from:
        qs = qs.filter(created_at__gte=timezone.make_aware(datetime.combine(date_from, time.min)))
    if date_to:
        qs = qs.filter(created_at__lt=timezone.make_aware(datetime.combine(date_to + timedelta(days=1), time.min)))
    return qs.order_by("-created_at", "-id")
