"""Webhook endpoints and their deliveries: the services (the only write path) and signing. The
delivery worker is integrations.webhook_delivery.

Signature (`Arbiter-Signature: t=<unix seconds>,v1=<hex>`): HMAC-SHA256 with the endpoint's secret
over `<t>.<raw body>`. For ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS after a rotation the header
carries a second `v1=` made with the previous secret (`t=<t>,v1=<new>,v1=<old>`); a receiver
accepts the request when any `v1` matches a secret it holds. A receiver recomputes it
(`verify_signature`), refuses a timestamp older than its tolerance
(ARBITER_WEBHOOK_SIGNATURE_TOLERANCE_SECONDS: a captured request cannot be replayed later) and
ignores an `Arbiter-Event-Id` it has already processed (a delivery may be retried after a timeout,
so the same event can arrive twice).

Outages (ADR 0027): an endpoint records when its current streak of failures began; it is
disabled only when a delivery fails and that streak is older than
ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS. While it fails everything, a delivery is not given up after
ARBITER_WEBHOOK_MAX_ATTEMPTS: it keeps being retried, at most ARBITER_WEBHOOK_BACKOFF_MAX_SECONDS
apart. A disabled endpoint still gets its events queued (pending, not attempted); enabling it again
sends them, oldest first."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from accounts.models import Role, User
from audit.services import audit_head_lock, audit_record
from core.db import retry_on_deadlock
from core.errors import Forbidden, Invalid, NotAllowed, NotFound
from integrations.catalogue import types_matching
from integrations.events import feed_assign, kick_deliveries
from integrations.models import (
    DeliveryStatus,
    EventType,
    IntegrationEvent,
    WebhookDelivery,
    WebhookEndpoint,
)
from integrations.webhook_address import TargetRefused, webhook_target

MANAGERS = {Role.ADMIN, Role.SUPERVISOR}
FORBIDDEN = "Webhooks are managed by supervisors and administrators."
NO_ENDPOINT = "No such webhook endpoint."
# Event types an endpoint may subscribe to: every type but `ping`, which goes to one endpoint on request.
SUBSCRIBABLE_TYPES = [value for value in EventType.values if value != EventType.PING]
# At most this many deliveries are handed to Celery at once (re-enabling, redelivering since); the
# beat poll sends the rest, oldest first.
KICK_AT_ONCE = 500


# --- signing ------------------------------------------------------------------------------------

def _digest(secret: str, body: bytes, timestamp: int) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(*, secret: str, body: bytes, timestamp: int, previous_secret: str = "") -> str:
    """The signature header: `t=<t>,v1=<hex>`, and a second `v1=` made with the previous secret
    while a rotation's overlap lasts."""
    header = f"t={timestamp},v1={_digest(secret, body, timestamp)}"
    if previous_secret:
        header += f",v1={_digest(previous_secret, body, timestamp)}"
    return header


def verify_signature(*, secret: str, header: str, body: bytes, tolerance_seconds: int,
                     now: float | None = None) -> bool:
    """What a receiver does: one of the header's signatures matches and it is recent. Returns False
    otherwise."""
    try:
        items = [item.split("=", 1) for item in header.split(",")]
        timestamps = [int(value) for name, value in items if name == "t"]
        signatures = [value for name, value in items if name == "v1"]
    except ValueError:
        return False
    if len(timestamps) != 1 or not signatures:
        return False
    if abs((now if now is not None else time.time()) - timestamps[0]) > tolerance_seconds:
        return False
    expected = _digest(secret, body, timestamps[0])
    return any(hmac.compare_digest(expected, candidate) for candidate in signatures)


def signing_secrets(endpoint: WebhookEndpoint, now: datetime) -> tuple[str, str]:
    """(the current secret, the previous one while its overlap lasts, else "")."""
    expires = endpoint.previous_secret_expires_at
    previous = endpoint.previous_secret if expires is not None and expires > now else ""
    return endpoint.secret, previous


# --- endpoint services ----------------------------------------------------------------------------

def _check_manager(actor: User) -> None:
    if actor.role not in MANAGERS:
        raise Forbidden(FORBIDDEN)


URL_MESSAGES = {
    "scheme": ("The webhook URL must use https.", "Use an https:// URL."),
    "credentials": ("The webhook URL must not hold a user name or password.",
                    "Remove user:password@ — the signature authenticates each delivery."),
    "host": ("The webhook URL needs a valid host.", "Give a host name or address."),
    "port": ("The webhook URL's port is not valid.", "Use a port from 1 to 65535."),
    "dns": ("The webhook URL's host does not resolve.", "Give a host name that resolves."),
    "address": ("The webhook URL must reach a public internet address.",
                "This host is, or resolves to, a loopback, private, link-local or otherwise non-public "
                "address. An operator can allow a network for receivers on premises "
                "(ARBITER_WEBHOOK_ALLOWED_NETWORKS)."),
}


class UrlUnreachable(Invalid):
    """A well-formed webhook URL whose host does not resolve, or resolves to an address this
    deployment may not reach (ARBITER_WEBHOOK_ALLOWED_NETWORKS): decided by DNS and settings, not
    by the request's text, so it is 422 `url_unreachable` rather than 400 (still an Invalid: the
    same refusal wherever a URL is checked)."""

    code = "url_unreachable"
    http_status = 422


def webhook_url_check(url: str) -> str:
    """Check a webhook URL for registration: its scheme (https, or http where the operator allows
    it), no credentials, and its host resolved now to public addresses only (or to networks the
    operator allows). Returns the URL. Raises Invalid (field `url`: the URL's text),
    UrlUnreachable (field `url`: its host's addresses) or ResolverUnavailable (503)."""
    try:
        webhook_target(url)
    except TargetRefused as exc:
        message, hint = URL_MESSAGES[exc.reason]
        refusal = UrlUnreachable if exc.reason in ("dns", "address") else Invalid
        raise refusal(message, fields={"url": [hint]}) from None
    return url


def _clean_types(event_types: list[str]) -> list[str]:
    unknown = [name for name in event_types if name not in SUBSCRIBABLE_TYPES]
    if unknown or not event_types:
        raise Invalid("Unknown or missing event types.",
                      fields={"event_types": [f"One or more of: {', '.join(SUBSCRIBABLE_TYPES)}."]})
    return sorted(set(event_types))


def _audit(actor: User, endpoint: WebhookEndpoint, action: str, payload: dict):
    return audit_record(tenant_id=endpoint.tenant_id, actor_type="user", actor_id=f"user:{actor.pk}", action=action,
                        target_type="webhookendpoint", target_id=endpoint.pk, decision="allowed", payload=payload)


def _lock_endpoint(actor: User, endpoint: WebhookEndpoint) -> WebhookEndpoint:
    """The checks and locks every endpoint service makes, in the order of ADR 0022: the role, the
    tenant (another tenant's endpoint, or a deleted one, does not exist for the actor), then the
    tenant's audit head before the endpoint row. A change's event inserts deliveries under a head,
    and each insert's foreign-key check takes a key-share lock on its endpoint, hence FOR NO KEY
    UPDATE, which does not block those checks."""
    _check_manager(actor)
    if endpoint.tenant_id != actor.tenant_id:
        raise NotFound(NO_ENDPOINT)
    audit_head_lock(tenant_id=endpoint.tenant_id)
    locked = WebhookEndpoint.objects.select_for_update(no_key=True).filter(pk=endpoint.pk,
                                                                          deleted_at__isnull=True).first()
    if locked is None:
        raise NotFound(NO_ENDPOINT)
    return locked


def _kick_after_commit(endpoint: WebhookEndpoint, delivery_ids: list[int]) -> None:
    """Hand the first deliveries (oldest first) to Celery after the commit; the beat poll sends the
    rest in the same order. Nothing is kicked for a disabled endpoint: its deliveries wait."""
    if endpoint.is_active and delivery_ids:
        first = delivery_ids[:KICK_AT_ONCE]
        transaction.on_commit(lambda: kick_deliveries(first))


def _pending_in_event_order(endpoint: WebhookEndpoint, event_ids: list[int] | None = None) -> list[int]:
    pending = WebhookDelivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.PENDING)
    if event_ids is not None:
        pending = pending.filter(event_id__in=event_ids)
    return list(pending.order_by("event_id", "id").values_list("id", flat=True))


def webhook_endpoint_create(*, actor: User, url: str, event_types: list[str],
                            description: str = "") -> tuple[WebhookEndpoint, str]:
    """Register an endpoint of the actor's tenant (supervisors and admins). Returns it and its
    signing secret (shown once). Refuses: Forbidden (role), Invalid (URL: scheme, credentials, a
    host that is not public; event types), ResolverUnavailable (the name service is down)."""
    _check_manager(actor)
    event_types = _clean_types(event_types)
    url = webhook_url_check(url)  # resolves the host: before the transaction, so none waits on DNS
    secret = f"whsec_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(tenant_id=actor.tenant_id, url=url, event_types=event_types,
                                                  description=description, secret=secret, created_by=actor)
        _audit(actor, endpoint, "integrations.webhook.created",
               {"url": endpoint.url, "event_types": endpoint.event_types})
    return endpoint, secret


def webhook_endpoint_update(*, actor: User, endpoint: WebhookEndpoint, url: str | None = None,
                            event_types: list[str] | None = None, description: str | None = None,
                            is_active: bool | None = None) -> WebhookEndpoint:
    """Change an endpoint. Enabling it again ends its failure streak and sends the deliveries
    queued meanwhile, oldest first. Same refusals as create, and NotFound (another tenant's or a
    deleted endpoint)."""
    _check_manager(actor)
    if url is not None:
        url = webhook_url_check(url)  # resolves the host: before the transaction and its row lock
    return _endpoint_change_atomic(actor, endpoint, url, event_types, description, is_active)


@retry_on_deadlock
@transaction.atomic
def _endpoint_change_atomic(actor: User, endpoint: WebhookEndpoint, url: str | None, event_types: list[str] | None,
                            description: str | None, is_active: bool | None) -> WebhookEndpoint:
    return _endpoint_change(actor, endpoint, url, event_types, description, is_active)


def _endpoint_change(actor: User, endpoint: WebhookEndpoint, url: str | None, event_types: list[str] | None,
                     description: str | None, is_active: bool | None) -> WebhookEndpoint:
    endpoint = _lock_endpoint(actor, endpoint)
    changes: dict = {}
    if url is not None:
        endpoint.url = changes["url"] = url
    if event_types is not None:
        endpoint.event_types = changes["event_types"] = _clean_types(event_types)
    if description is not None:
        endpoint.description = changes["description"] = description
    requeued: list[int] = []
    if is_active is not None and is_active != endpoint.is_active:
        endpoint.is_active = changes["is_active"] = is_active
        if is_active:
            endpoint.consecutive_failures, endpoint.failing_since = 0, None
            endpoint.disabled_at, endpoint.disabled_reason = None, ""
            requeued = _pending_in_event_order(endpoint)
            WebhookDelivery.objects.filter(pk__in=requeued).update(next_attempt_at=timezone.now())
            changes["queued_deliveries_sent"] = len(requeued)
        else:
            endpoint.disabled_at = timezone.now()
            endpoint.disabled_reason = "Disabled by a person; its events are queued until it is enabled again."
    endpoint.save()
    _audit(actor, endpoint, "integrations.webhook.changed", changes)
    _kick_after_commit(endpoint, requeued)
    return endpoint


@retry_on_deadlock
@transaction.atomic
def webhook_endpoint_delete(*, actor: User, endpoint: WebhookEndpoint) -> dict[str, int]:
    """Delete an endpoint: it is gone from the API and the admin's list and is never delivered to
    again; its pending deliveries are cancelled; its secrets are erased. The row stays, as a
    tombstone, so its deliveries and their attempt log are kept (ADR 0027). Returns how many
    deliveries were cancelled. Refuses: Forbidden (role), NotFound (another tenant's, or deleted)."""
    endpoint = _lock_endpoint(actor, endpoint)
    cancelled = WebhookDelivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.PENDING) \
        .update(status=DeliveryStatus.CANCELLED, locked_until=None)
    history = dict(WebhookDelivery.objects.filter(endpoint=endpoint).values_list("status")
                   .annotate(n=Count("id")).values_list("status", "n"))
    endpoint.deleted_at = endpoint.disabled_at = timezone.now()
    endpoint.is_active, endpoint.disabled_reason = False, "Deleted."
    endpoint.secret = endpoint.previous_secret = ""
    endpoint.previous_secret_expires_at = None
    endpoint.save()
    _audit(actor, endpoint, "integrations.webhook.deleted",
           {"url": endpoint.url, "event_types": endpoint.event_types, "cancelled": cancelled,
            "deliveries_kept": history})
    return {"cancelled": cancelled}


@retry_on_deadlock
@transaction.atomic
def webhook_secret_rotate(*, actor: User, endpoint: WebhookEndpoint) -> tuple[WebhookEndpoint, str]:
    """Give the endpoint a new signing secret, returned once. For
    ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS deliveries are signed with the new and the previous
    secret (two `v1=` in the header), then with the new one only. The previous secret is stored as
    the current one is. Rotating again within the overlap drops the oldest secret. Refuses:
    Forbidden (role), NotFound (another tenant's, or deleted)."""
    endpoint = _lock_endpoint(actor, endpoint)
    new_secret = f"whsec_{secrets.token_urlsafe(32)}"
    overlap = settings.ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS
    if overlap > 0:
        endpoint.previous_secret = endpoint.secret
        endpoint.previous_secret_expires_at = timezone.now() + timedelta(seconds=overlap)
    else:
        endpoint.previous_secret, endpoint.previous_secret_expires_at = "", None
    endpoint.secret = new_secret
    endpoint.save()
    _audit(actor, endpoint, "integrations.webhook.secret_rotated",
           {"previous_secret_valid_until": endpoint.previous_secret_expires_at.isoformat()
                                                    if endpoint.previous_secret_expires_at else None})
    return endpoint, new_secret


@retry_on_deadlock
@transaction.atomic
def webhook_ping(*, actor: User, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """Send a `ping` event to this endpoint only: it is not in the feed and no other endpoint gets
    it. Its body is an event like any other (`sequence` null). Refuses: Forbidden (role), NotFound
    (another tenant's, or deleted), NotAllowed (the endpoint is disabled)."""
    endpoint = _lock_endpoint(actor, endpoint)
    if not endpoint.is_active:
        raise NotAllowed("This endpoint is disabled, so a ping would wait with its other events. Enable it "
                         "first (PATCH is_active=true), then ping it.")
    audit_event = _audit(actor, endpoint, "integrations.webhook.pinged", {"url": endpoint.url})
    event = IntegrationEvent.objects.create(
        tenant_id=endpoint.tenant_id, type=EventType.PING, audit_event=audit_event, occurred_at=audit_event.created_at,
        data={"action": audit_event.action, "actor": audit_event.actor_id, "decision": "allowed",
              "target_type": "webhookendpoint", "target_id": str(endpoint.pk), "case": None, "run_id": None,
              "object_url": None, "audit_event_id": audit_event.pk})
    delivery = WebhookDelivery.objects.create(endpoint=endpoint, event=event, next_attempt_at=timezone.now())
    _kick_after_commit(endpoint, [delivery.pk])
    return delivery


@retry_on_deadlock
@transaction.atomic
def webhook_redeliver(*, actor: User, delivery: WebhookDelivery) -> WebhookDelivery:
    """Queue a delivery again now, with a fresh attempt budget (its attempt log is kept).
    Refuses: Forbidden (role), NotFound (another tenant's, or its endpoint was deleted), NotAllowed
    (while it is being delivered or queued, or its endpoint is disabled).

    Locks, in the order of ADR 0022: the tenant's audit head (its event goes there), the endpoint,
    the delivery. Locking the delivery joined to its endpoint first, FOR UPDATE, deadlocked with any
    change recording an event for this endpoint: that change holds the head and its new delivery's
    foreign-key check waits on the endpoint row."""
    endpoint = _lock_endpoint(actor, delivery.endpoint)
    locked = WebhookDelivery.objects.select_for_update(no_key=True).get(pk=delivery.pk)
    locked.endpoint = endpoint
    if locked.status in (DeliveryStatus.DELIVERING, DeliveryStatus.PENDING):
        raise NotAllowed("This delivery is already queued; wait for its outcome.")
    if not locked.endpoint.is_active:
        raise NotAllowed("The endpoint is disabled: enable it first (PATCH is_active=true).")
    locked.status, locked.attempts, locked.next_attempt_at = DeliveryStatus.PENDING, 0, timezone.now()
    locked.save(update_fields=["status", "attempts", "next_attempt_at"])
    _audit(actor, locked.endpoint, "integrations.webhook.redelivered", {"delivery": locked.pk})
    transaction.on_commit(lambda: kick_deliveries([locked.pk]))
    return locked


# --- redelivering everything since a time or an event ------------------------------------------------

EVENT_ID = re.compile(r"evt_([0-9]{1,18})")
SEQUENCE = re.compile(r"[0-9]{1,18}")


def webhook_redeliver_since(*, actor: User, endpoint: WebhookEndpoint, since: datetime | None = None,
                            since_event: str | None = None) -> dict[str, int]:
    """Queue again every event of the types the endpoint subscribes to since a time (`occurred_at`
    at or after it) or since an event (`evt_<id>`: that event and every one after it in the feed;
    a bare number: feed sequences from it on). Events never sent to this endpoint get a delivery;
    delivered or failed ones are queued again with a fresh attempt budget; queued ones are left as
    they are. At most ARBITER_WEBHOOK_REDELIVER_MAX events per call. A disabled endpoint's
    deliveries wait until it is enabled. Returns {"events", "queued", "already_queued"}.
    Refuses: Forbidden (role), NotFound (another tenant's, or deleted), Invalid (neither or both
    of since and since_event, a time in the future, an event that is not the tenant's, too many)."""
    _check_manager(actor)
    if endpoint.tenant_id != actor.tenant_id or endpoint.deleted_at is not None:
        raise NotFound(NO_ENDPOINT)
    if (since is None) == (since_event is None):
        raise Invalid("Say where to start: give either `since` (a time) or `since_event` (an event id such as "
                      "evt_123, or a feed sequence), not both.",
                      fields={"since": ["Give since or since_event."], "since_event": ["Give since or since_event."]})
    feed_assign()  # alone in its own transaction (lock order: the feed counter is taken by nothing else)
    return _redeliver_since_atomic(actor, endpoint, since, since_event)


def _events_since(endpoint: WebhookEndpoint, since: datetime | None, since_event: str | None):
    # Every stored type the endpoint receives: a former umbrella type stands for the types it became.
    kinds = sorted({kind for subscribed in endpoint.event_types or [] for kind in types_matching(subscribed)})
    events = IntegrationEvent.objects.filter(tenant_id=endpoint.tenant_id, type__in=kinds).exclude(type=EventType.PING)
    if since is not None:
        if since > timezone.now():
            raise Invalid("The time to redeliver from is in the future.",
                          fields={"since": ["Give a time in the past (ISO 8601, e.g. 2026-11-27T06:00:00Z)."]})
        return events.filter(occurred_at__gte=since)
    text = str(since_event).strip()
    if SEQUENCE.fullmatch(text):
        return events.filter(feed_sequence__gte=int(text))
    match = EVENT_ID.fullmatch(text)
    start = None
    if match:
        start = IntegrationEvent.objects.filter(tenant_id=endpoint.tenant_id, pk=int(match.group(1)),
                                                feed_sequence__isnull=False).exclude(type=EventType.PING) \
            .values_list("feed_sequence", flat=True).first()
    if start is None:
        raise Invalid("There is no event of yours with this id.",
                      fields={"since_event": ["Give the `id` of an event you received (evt_123) or a feed "
                                              "`sequence` (a whole number)."]})
    return events.filter(feed_sequence__gte=start)


@retry_on_deadlock
@transaction.atomic
def _redeliver_since_atomic(actor: User, endpoint: WebhookEndpoint, since: datetime | None,
                            since_event: str | None) -> dict[str, int]:
    endpoint = _lock_endpoint(actor, endpoint)
    event_ids = list(_events_since(endpoint, since, since_event).order_by("feed_sequence", "id")
                     .values_list("id", flat=True)[:settings.ARBITER_WEBHOOK_REDELIVER_MAX + 1])
    limit = settings.ARBITER_WEBHOOK_REDELIVER_MAX
    if len(event_ids) > limit:
        raise Invalid(f"More events match than one call redelivers (at most {limit}); nothing was queued.",
                      fields={"since_event" if since is None else "since": [
                          f"Redeliver in steps: start from a later point, or read the events from "
                          f"GET /api/v1/events/?after=<sequence>. At most {limit} events per call."]})
    now = timezone.now()
    deliveries = WebhookDelivery.objects.filter(endpoint=endpoint, event_id__in=event_ids)
    already_queued = deliveries.filter(status__in=[DeliveryStatus.PENDING, DeliveryStatus.DELIVERING]).count()
    requeued = deliveries.filter(status__in=[DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED,
                                             DeliveryStatus.CANCELLED]) \
        .update(status=DeliveryStatus.PENDING, attempts=0, next_attempt_at=now, locked_until=None)
    known = set(deliveries.values_list("event_id", flat=True))
    created = WebhookDelivery.objects.bulk_create(
        [WebhookDelivery(endpoint=endpoint, event_id=event_id, next_attempt_at=now)
         for event_id in event_ids if event_id not in known])
    counts = {"events": len(event_ids), "queued": requeued + len(created), "already_queued": already_queued}
    _audit(actor, endpoint, "integrations.webhook.redelivered_since",
           {"since": since.isoformat() if since else None, "since_event": since_event, **counts})
    _kick_after_commit(endpoint, _pending_in_event_order(endpoint, event_ids))
    return counts
