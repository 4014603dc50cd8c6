"""The write path of the browser UI's own data (saved queue views, read marks, the density a
person chose) and its one audit action, "Verify now". A saved view is a person's preference, not
case state: it is not audited and changes nothing anyone else sees."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models.functions import Greatest
from django.http import QueryDict
from django.utils import timezone

from audit.selectors import audit_chain_status
from audit.verify import ChainBreak, verify_stream_and_record
from core.errors import Forbidden, Invalid, NotFound
from web.access import AUDIT_FORBIDDEN_MESSAGE
from web.models import NotificationsRead, SavedView

logger = logging.getLogger(__name__)

SAVED_VIEWS_PER_USER = 30
QUERY_KEYS_DROPPED = ("after", "before", "page", "saved")


def _clean_query(query: str) -> str:
    data = QueryDict(query or "", mutable=True)
    for key in QUERY_KEYS_DROPPED:
        data.pop(key, None)
    for key in [k for k, values in data.lists() if not any(v.strip() for v in values)]:
        data.pop(key)
    return data.urlencode()


@transaction.atomic
def saved_view_save(*, user, name: str, query: str) -> SavedView:
    """Save the queue's current filters under `name` for `user` (saving under an existing name
    replaces that view's filters). Raises Invalid for an empty or over-long name, a query over
    1,000 characters, or more than SAVED_VIEWS_PER_USER views; nothing is saved then."""
    if getattr(user, "tenant_id", None) is None:
        raise Invalid("Your account is not attached to a tenant, so it has no queue to save.")
    name = (name or "").strip()
    errors = {}
    if not name:
        errors["name"] = ["Give the view a name, e.g. “My high-risk mortgages”."]
    elif len(name) > 80:
        errors["name"] = ["At most 80 characters."]
    cleaned = _clean_query(query)
    if len(cleaned) > 1000:
        errors["name"] = [*errors.get("name", []), "These filters are too long to save; remove some."]
    if errors:
        raise Invalid("The view was not saved.", fields=errors)
    existing = SavedView.objects.select_for_update().filter(user=user, name=name).first()
    if existing is not None:
        existing.query = cleaned
        existing.save(update_fields=["query", "updated_at"])
        return existing
    if SavedView.objects.filter(user=user).count() >= SAVED_VIEWS_PER_USER:
        raise Invalid(f"You have {SAVED_VIEWS_PER_USER} saved views, the most there can be; delete one first.",
                      fields={"name": ["Too many saved views."]})
    try:
        with transaction.atomic():
            return SavedView.objects.create(tenant_id=user.tenant_id, user=user, name=name, query=cleaned)
    except IntegrityError:  # saved at the same moment in another tab: that one stands, with these filters
        view = SavedView.objects.select_for_update().get(user=user, name=name)
        view.query = cleaned
        view.save(update_fields=["query", "updated_at"])
        return view


@transaction.atomic
def saved_view_delete(*, user, pk: int) -> None:
    """Delete one of `user`'s saved views. Someone else's view (or none) is NotFound."""
    deleted, _ = SavedView.objects.filter(user=user, pk=pk).delete()
    if not deleted:
        raise NotFound("No such saved view among yours; it may have been deleted already.")


def saved_views_for_user(*, user):
    return SavedView.objects.filter(user=user).order_by("name", "id")


def notifications_mark_read(*, user, until) -> None:
    """Mark `user`'s notifications read up to `until` (the time of the list they saw, so one that
    arrived since stays unread). Never moves the mark back: a stale page cannot unread anything."""
    mark, created = NotificationsRead.objects.get_or_create(user=user, defaults={"read_until": until})
    if not created:
        # One conditional UPDATE: two tabs marking at once keep the later of the two times.
        NotificationsRead.objects.filter(pk=mark.pk).update(read_until=Greatest("read_until", until))


@dataclass(frozen=True)
class StreamVerification:
    """What "Verify now" found for one stream: intact up to `events` (its latest event) at `at`,
    or `broken` at an event."""

    stream: str
    events: int
    at: datetime
    broken: ChainBreak | None


def audit_stream_verify_now(*, user, stream: str) -> StreamVerification:
    """Verify one of the tenant's audit streams now, in full (every event, and the latest signed
    anchor: audit.verify.verify_stream_and_record). A stream that passes gets its verified head
    recorded with this time (audit.models.AuditVerifiedHead, the record `audit_verify` keeps and
    the timeline reads); a broken one keeps its recorded head. Auditors, supervisors and
    administrators only (Forbidden); a stream that is not the tenant's is NotFound; nothing is
    recorded when it refuses. Takes no lock a write path waits for: the walk reads, the verified
    head is one upsert. Not an audit event: like `audit_verify`, it records its result in the
    verified head (and the log), and appending an event would leave the stream unverified again."""
    if not getattr(user, "can_see_audit", False) or user.tenant_id is None:
        raise Forbidden(AUDIT_FORBIDDEN_MESSAGE)
    known = audit_chain_status(tenant_id=user.tenant_id, streams=[stream or ""]).get(stream or "")
    if known is None:
        raise NotFound("That audit stream is not one of your organisation's; reload the audit page.")
    broken, head = verify_stream_and_record(stream)
    at = head.verified_at if broken is None and head is not None else timezone.now()
    events = head.sequence if broken is None and head is not None else known.events
    logger.info("audit stream verified on request", extra={"stream": stream, "user_id": user.pk,
                                                          "intact": broken is None, "events": events})
    return StreamVerification(stream=stream, events=events, at=at, broken=broken)
