"""Webhook endpoints and deliveries: the services (the only write path), signing, and delivery.

Signature (`Arbiter-Signature: t=<unix seconds>,v1=<hex>`): HMAC-SHA256 with the endpoint's secret
over `<t>.<raw body>`. A receiver recomputes it (`verify_signature`), refuses a timestamp older
than its tolerance (ARBITER_WEBHOOK_SIGNATURE_TOLERANCE_SECONDS: a captured request cannot be
replayed later) and ignores an `Arbiter-Event-Id` it has already processed (a delivery may be
retried after a timeout, so the same event can arrive twice)."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import secrets
import ssl
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import Role, User
from audit.services import audit_head_lock, audit_record
from core.db import retry_on_deadlock
from core.errors import Forbidden, Invalid, NotAllowed
from integrations.events import event_representation, kick_deliveries
from integrations.models import (
    DeliveryError,
    DeliveryStatus,
    EventType,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from integrations.webhook_address import ResolverUnavailable, TargetRefused, pinned_connection, webhook_target

logger = logging.getLogger(__name__)

MANAGERS = {Role.ADMIN, Role.SUPERVISOR}
FORBIDDEN = "Webhooks are managed by supervisors and administrators."


# --- signing ------------------------------------------------------------------------------------

def sign(*, secret: str, body: bytes, timestamp: int) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify_signature(*, secret: str, header: str, body: bytes, tolerance_seconds: int,
                     now: float | None = None) -> bool:
    """What a receiver does: the signature matches and is recent. Returns False otherwise."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        timestamp = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs((now if now is not None else time.time()) - timestamp) > tolerance_seconds:
        return False
    expected = sign(secret=secret, body=body, timestamp=timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


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


def webhook_url_check(url: str) -> str:
    """Check a webhook URL for registration: its scheme (https, or http where the operator allows
    it), no credentials, and its host resolved now to public addresses only (or to networks the
    operator allows). Returns the URL. Raises Invalid (field `url`) or ResolverUnavailable (503)."""
    try:
        webhook_target(url)
    except TargetRefused as exc:
        message, hint = URL_MESSAGES[exc.reason]
        raise Invalid(message, fields={"url": [hint]}) from None
    return url


def _clean_types(event_types: list[str]) -> list[str]:
    unknown = [name for name in event_types if name not in EventType.values]
    if unknown or not event_types:
        raise Invalid("Unknown or missing event types.",
                      fields={"event_types": [f"One or more of: {', '.join(EventType.values)}."]})
    return sorted(set(event_types))


def _audit(actor: User, endpoint: WebhookEndpoint, action: str, payload: dict) -> None:
    audit_record(tenant_id=endpoint.tenant_id, actor_type="user", actor_id=f"user:{actor.pk}", action=action,
                 target_type="webhookendpoint", target_id=endpoint.pk, decision="allowed", payload=payload)


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
    """Change an endpoint; enabling it again clears its failure count. Same refusals as create."""
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
    # Lock order (ADR 0022): the tenant's audit head before the endpoint row, as every change that
    # records an event does (its event's deliveries reference the endpoint under the head). FOR NO
    # KEY UPDATE: it does not block those deliveries' foreign-key checks.
    audit_head_lock(tenant_id=endpoint.tenant_id)
    endpoint = WebhookEndpoint.objects.select_for_update(no_key=True).get(pk=endpoint.pk)
    changes = {}
    if url is not None:
        endpoint.url = changes["url"] = url
    if event_types is not None:
        endpoint.event_types = changes["event_types"] = _clean_types(event_types)
    if description is not None:
        endpoint.description = changes["description"] = description
    if is_active is not None and is_active != endpoint.is_active:
        endpoint.is_active = changes["is_active"] = is_active
        if is_active:
            endpoint.consecutive_failures, endpoint.disabled_at, endpoint.disabled_reason = 0, None, ""
        else:
            endpoint.disabled_at, endpoint.disabled_reason = timezone.now(), f"disabled by user:{actor.pk}"
    endpoint.save()
    _audit(actor, endpoint, "integrations.webhook.changed", changes)
    return endpoint


@retry_on_deadlock
@transaction.atomic
def webhook_redeliver(*, actor: User, delivery: WebhookDelivery) -> WebhookDelivery:
    """Queue a delivery again now, with a fresh attempt budget (its attempt log is kept).
    Refuses: Forbidden (role), NotAllowed (while it is being delivered, or its endpoint is disabled).

    Locks, in the order of ADR 0022: the tenant's audit head (its event goes there), the endpoint,
    the delivery. Locking the delivery joined to its endpoint first, FOR UPDATE, deadlocked with any
    change recording an event for this endpoint: that change holds the head and its new delivery's
    foreign-key check waits on the endpoint row."""
    _check_manager(actor)
    audit_head_lock(tenant_id=delivery.endpoint.tenant_id)
    endpoint = WebhookEndpoint.objects.select_for_update(no_key=True).get(pk=delivery.endpoint_id)
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


# --- delivery ---------------------------------------------------------------------------------------

def _post(url: str, body: bytes, headers: dict) -> tuple[int | None, str]:
    """POST once. Returns (status code or None, error category or ""). The URL is checked and
    resolved again now (its name may point elsewhere since registration) and the connection goes
    to the address that was checked. A redirect is an answer, never followed. The detail of a
    failure goes to the worker log only; the receiver's body is not read."""
    try:
        target = webhook_target(url)
    except (TargetRefused, ResolverUnavailable) as exc:
        category = getattr(exc, "category", DeliveryError.DNS)
        logger.warning("webhook delivery not sent (%s): %s", category, exc)
        return None, category
    connection = pinned_connection(target, timeout=settings.ARBITER_WEBHOOK_TIMEOUT_SECONDS)
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        status_code = connection.getresponse().status
    except Exception as exc:  # noqa: BLE001  (every failure is an outcome of the attempt)
        category = _failure_category(exc)
        logger.warning("webhook delivery to %s failed (%s): %s: %s", target.host, category, type(exc).__name__, exc)
        return None, category
    finally:
        connection.close()
    if 200 <= status_code < 300:
        return status_code, ""
    return status_code, DeliveryError.REDIRECT if 300 <= status_code < 400 else DeliveryError.HTTP_STATUS


def _failure_category(exc: Exception) -> str:
    # Order matters: TLS errors and http.client's RemoteDisconnected are OSErrors too.
    if isinstance(exc, TimeoutError):
        return DeliveryError.TIMEOUT
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return DeliveryError.TLS
    if isinstance(exc, http.client.HTTPException):
        return DeliveryError.PROTOCOL
    if isinstance(exc, OSError):
        return DeliveryError.CONNECT
    return DeliveryError.PROTOCOL


def _claim(delivery_id: int, now) -> bool:
    """Compare-and-set: one worker delivers a due row; a crashed worker's claim expires."""
    lease = now + timedelta(seconds=settings.ARBITER_WEBHOOK_TIMEOUT_SECONDS + 30)
    return bool(WebhookDelivery.objects.filter(
        Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        | Q(status=DeliveryStatus.DELIVERING, locked_until__lt=now), pk=delivery_id)
        .update(status=DeliveryStatus.DELIVERING, locked_until=lease))


def webhook_deliver(*, delivery_id: int) -> WebhookDelivery | None:
    """Attempt one due delivery (None if it is not due or someone else has it), log the attempt,
    then mark it succeeded, or schedule a retry with exponential backoff, or fail it after
    ARBITER_WEBHOOK_MAX_ATTEMPTS; an endpoint failing ARBITER_WEBHOOK_DISABLE_AFTER times in a row
    is disabled. May run twice for one row: the claim makes the second a no-op."""
    now = timezone.now()
    if not _claim(delivery_id, now):
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint", "event", "event__tenant").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if not endpoint.is_active:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.FAILED, locked_until=None,
                                                              last_error_category=DeliveryError.DISABLED)
        return WebhookDelivery.objects.get(pk=delivery.pk)
    if delivery.event.feed_sequence is None:
        from integrations.events import feed_assign

        feed_assign()
        delivery.event.refresh_from_db(fields=["feed_sequence"])
    body = json.dumps(event_representation(delivery.event, tenant_slug=delivery.event.tenant.slug),
                      separators=(",", ":")).encode()
    timestamp = int(time.time())
    headers = {"Content-Type": "application/json", "User-Agent": "Arbiter-Webhooks/1",
               "Arbiter-Signature": sign(secret=endpoint.secret, body=body, timestamp=timestamp),
               "Arbiter-Event-Id": f"evt_{delivery.event_id}", "Arbiter-Event-Type": delivery.event.type,
               "Arbiter-Delivery-Id": str(delivery.pk)}
    started = time.monotonic()
    status_code, category = _post(endpoint.url, body, headers)
    duration_ms = int((time.monotonic() - started) * 1000)
    succeeded = status_code is not None and 200 <= status_code < 300
    with transaction.atomic():
        # The endpoint before the delivery (ADR 0022), as redelivery locks them.
        WebhookEndpoint.objects.select_for_update(no_key=True).filter(pk=endpoint.pk).first()
        delivery = WebhookDelivery.objects.select_for_update(no_key=True).get(pk=delivery.pk)
        number = WebhookAttempt.objects.filter(delivery=delivery).count() + 1
        WebhookAttempt.objects.create(delivery=delivery, number=number, started_at=now, duration_ms=duration_ms,
                                      status_code=status_code, error_category=category,
                                      succeeded=succeeded)
        delivery.attempts += 1
        delivery.last_status_code, delivery.last_error_category = status_code, category
        delivery.locked_until = None
        if succeeded:
            delivery.status, delivery.delivered_at = DeliveryStatus.SUCCEEDED, timezone.now()
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=0)
        else:
            if delivery.attempts >= settings.ARBITER_WEBHOOK_MAX_ATTEMPTS:
                delivery.status = DeliveryStatus.FAILED
            else:
                delivery.status = DeliveryStatus.PENDING
                backoff = settings.ARBITER_WEBHOOK_BACKOFF_SECONDS * 2 ** (delivery.attempts - 1)
                delivery.next_attempt_at = timezone.now() + timedelta(seconds=backoff)
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=F("consecutive_failures") + 1)
            WebhookEndpoint.objects.filter(pk=endpoint.pk, is_active=True,
                                           consecutive_failures__gte=settings.ARBITER_WEBHOOK_DISABLE_AFTER) \
                .update(is_active=False, disabled_at=timezone.now(),
                        disabled_reason=f"{settings.ARBITER_WEBHOOK_DISABLE_AFTER} failed deliveries in a row.")
        delivery.save()
    return delivery


def webhook_deliver_due(*, limit: int = 100) -> int:
    """Deliver what is due (the beat poll): pending rows whose time came, and rows whose worker
    died mid-delivery. Returns how many were attempted."""
    now = timezone.now()
    due = list(WebhookDelivery.objects.filter(
        Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        | Q(status=DeliveryStatus.DELIVERING, locked_until__lt=now)).order_by("next_attempt_at", "id")
        .values_list("id", flat=True)[:limit])
    attempted = 0
    for delivery_id in due:
        if webhook_deliver(delivery_id=delivery_id) is not None:
            attempted += 1
    return attempted
