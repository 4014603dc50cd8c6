"""Audit reads, scoped to a tenant id (this app imports nothing of ours; callers pass the user's
tenant and have checked the role)."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from audit.models import AuditEvent, AuditStreamHead, AuditVerifiedHead


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


@dataclass(frozen=True)
class ChainStatus:
    """What is known of one stream's hash chain without recomputing it: how many events it holds
    (its head) and the last event a verification (`audit_verify`, audit.verify) found intact."""

    stream: str
    events: int
    verified_sequence: int | None
    verified_at: datetime | None

    @property
    def never_verified(self) -> bool:
        return self.verified_sequence is None

    @property
    def appended_since(self) -> int:
        """Events written after the last verified one (all of them when never verified)."""
        return max(0, self.events - (self.verified_sequence or 0))

    @property
    def up_to_date(self) -> bool:
        return not self.never_verified and self.appended_since == 0


def audit_chain_status(*, tenant_id: int, streams: Iterable[str]) -> dict[str, ChainStatus]:
    """The chain status of each of `streams` that holds the tenant's events (another tenant's
    stream, or a name that is no stream, is left out), read from the stream heads and the verified
    heads in one query: no hash is recomputed (the timeline shows this on every page load)."""
    names = sorted(set(streams))
    if not names:
        return {}
    # A stream is one tenant's (per case, or per tenant): its first event says whose it is.
    owned = AuditEvent.objects.filter(tenant_id=tenant_id, stream__in=names, sequence=1).values("stream")
    verified = AuditVerifiedHead.objects.filter(stream=OuterRef("stream"))
    rows = (AuditStreamHead.objects.filter(stream__in=owned)
            .annotate(verified_sequence=Subquery(verified.values("sequence")[:1]),
                      verified_at=Subquery(verified.values("verified_at")[:1]))
            .values_list("stream", "last_sequence", "verified_sequence", "verified_at"))
    return {stream: ChainStatus(stream=stream, events=events, verified_sequence=sequence, verified_at=at)
            for stream, events, sequence, at in rows}


def audit_latest_event_id(*, tenant_id: int, action_prefix: str) -> int:
    """The id of the tenant's newest audit event whose action starts with `action_prefix` (0 when
    none): a token that changes whenever something of that kind changed. One query, walking the
    (tenant, created_at, id) index from its newest end."""
    return (AuditEvent.objects.filter(tenant_id=tenant_id, action__startswith=action_prefix)
            .order_by("-created_at", "-id").values_list("id", flat=True).first()) or 0
