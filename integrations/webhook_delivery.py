"""Webhook delivery: one attempt of a due delivery, its outcome, retries and the failure window
(ADR 0009, ADR 0015, ADR 0027). The services that change endpoints are in integrations.webhooks.

A delivery is retried with exponential backoff (ARBITER_WEBHOOK_BACKOFF_SECONDS doubling, at most
ARBITER_WEBHOOK_BACKOFF_MAX_SECONDS apart). It is given up after ARBITER_WEBHOOK_MAX_ATTEMPTS only
when its endpoint is not failing everything: if the endpoint's failure streak began before this
attempt (no success since), the receiver is down, and the delivery keeps being retried until the
streak has lasted ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS; then the endpoint is disabled and its
deliveries wait, queued, until a person enables it again. An outage shorter than the window loses
no event."""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from integrations.events import event_representation, feed_assign
from integrations.models import (
    DeliveryError,
    DeliveryStatus,
    EventType,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from integrations.webhook_address import ResolverUnavailable, TargetRefused, pinned_connection, webhook_target
from integrations.webhooks import sign, signing_secrets

logger = logging.getLogger(__name__)


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


def _due(now: datetime) -> Q:
    """Due: pending and its time came, or claimed by a worker whose claim expired; and its endpoint
    enabled and not deleted (a disabled endpoint's deliveries wait, not failed)."""
    return (Q(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
            | Q(status=DeliveryStatus.DELIVERING, locked_until__lt=now)) \
        & Q(endpoint__is_active=True, endpoint__deleted_at__isnull=True)


def _claim(delivery_id: int, now: datetime) -> bool:
    """Compare-and-set: one worker delivers a due row; a crashed worker's claim expires."""
    lease = now + timedelta(seconds=settings.ARBITER_WEBHOOK_TIMEOUT_SECONDS + 30)
    return bool(WebhookDelivery.objects.filter(_due(now), pk=delivery_id)
                .update(status=DeliveryStatus.DELIVERING, locked_until=lease))


def _release(delivery_id: int) -> None:
    """Give a claim back untouched (its endpoint was disabled or deleted after the claim)."""
    WebhookDelivery.objects.filter(pk=delivery_id, status=DeliveryStatus.DELIVERING) \
        .update(status=DeliveryStatus.PENDING, locked_until=None)


def _request(delivery: WebhookDelivery, now: datetime) -> tuple[bytes, dict]:
    event = delivery.event
    if event.feed_sequence is None and event.type != EventType.PING:  # a ping is never in the feed
        feed_assign()
        event.refresh_from_db(fields=["feed_sequence"])
    body = json.dumps(event_representation(event, tenant_slug=event.tenant.slug), separators=(",", ":")).encode()
    secret, previous = signing_secrets(delivery.endpoint, now)
    headers = {"Content-Type": "application/json", "User-Agent": "Arbiter-Webhooks/1",
               "Arbiter-Signature": sign(secret=secret, body=body, timestamp=int(time.time()),
                                         previous_secret=previous),
               "Arbiter-Event-Id": f"evt_{event.pk}", "Arbiter-Event-Type": event.type,
               "Arbiter-Delivery-Id": str(delivery.pk)}
    return body, headers


def webhook_deliver(*, delivery_id: int) -> WebhookDelivery | None:
    """Attempt one due delivery (None if it is not due, someone else has it, or its endpoint was
    disabled or deleted meanwhile), log the attempt, then mark it succeeded, or schedule a retry,
    or give it up (see the module's docstring); a failure may disable the endpoint. May run twice
    for one row: the claim makes the second a no-op."""
    now = timezone.now()
    if not _claim(delivery_id, now):
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint", "event", "event__tenant").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if not endpoint.is_active or endpoint.deleted_at is not None:
        _release(delivery_id)
        return None
    body, headers = _request(delivery, now)
    started = time.monotonic()
    status_code, category = _post(endpoint.url, body, headers)
    duration_ms = int((time.monotonic() - started) * 1000)
    return _record_attempt(delivery_id=delivery.pk, endpoint_id=endpoint.pk, started_at=now,
                           duration_ms=duration_ms, status_code=status_code, category=category)


@transaction.atomic
def _record_attempt(*, delivery_id: int, endpoint_id: int, started_at: datetime, duration_ms: int,
                    status_code: int | None, category: str) -> WebhookDelivery:
    # The endpoint before the delivery (ADR 0022), as redelivery locks them.
    endpoint = WebhookEndpoint.objects.select_for_update(no_key=True).get(pk=endpoint_id)
    delivery = WebhookDelivery.objects.select_for_update(no_key=True).get(pk=delivery_id)
    succeeded = status_code is not None and 200 <= status_code < 300
    number = WebhookAttempt.objects.filter(delivery=delivery).count() + 1
    WebhookAttempt.objects.create(delivery=delivery, number=number, started_at=started_at, duration_ms=duration_ms,
                                  status_code=status_code, error_category=category, succeeded=succeeded)
    delivery.attempts += 1
    delivery.last_status_code, delivery.last_error_category = status_code, category
    delivery.locked_until = None
    now = timezone.now()
    if succeeded:
        delivery.status, delivery.delivered_at = DeliveryStatus.SUCCEEDED, now
        endpoint.consecutive_failures, endpoint.failing_since = 0, None
    else:
        # Failing everything: the streak began before this attempt and no success came since.
        outage = endpoint.failing_since is not None and endpoint.failing_since <= started_at
        endpoint.consecutive_failures += 1
        endpoint.failing_since = endpoint.failing_since or started_at
        _schedule_retry(delivery, outage=outage, now=now)
        _disable_after_window(endpoint, now)
    if endpoint.deleted_at is not None and delivery.status == DeliveryStatus.PENDING:
        delivery.status = DeliveryStatus.CANCELLED  # deleted while this attempt was under way
    endpoint.save(update_fields=["consecutive_failures", "failing_since", "is_active", "disabled_at",
                                 "disabled_reason"])
    delivery.save()
    return delivery


def _schedule_retry(delivery: WebhookDelivery, *, outage: bool, now: datetime) -> None:
    if delivery.attempts >= settings.ARBITER_WEBHOOK_MAX_ATTEMPTS and not outage:
        delivery.status = DeliveryStatus.FAILED
        return
    delivery.status = DeliveryStatus.PENDING
    backoff = min(settings.ARBITER_WEBHOOK_BACKOFF_SECONDS * 2 ** min(delivery.attempts - 1, 40),
                  settings.ARBITER_WEBHOOK_BACKOFF_MAX_SECONDS)
    delivery.next_attempt_at = now + timedelta(seconds=backoff)


def _disable_after_window(endpoint: WebhookEndpoint, now: datetime) -> None:
    window = settings.ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS
    if endpoint.is_active and endpoint.failing_since is not None \
            and now - endpoint.failing_since > timedelta(seconds=window):
        endpoint.is_active, endpoint.disabled_at = False, now
        endpoint.disabled_reason = (f"Its deliveries failed continuously for more than {_duration(window)}. Its "
                                    f"events are queued and will be sent once it is enabled again.")


def _duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} second{'s' if seconds != 1 else ''}"


def webhook_deliver_due(*, limit: int = 100) -> int:
    """Deliver what is due (the beat poll), oldest event first: pending rows whose time came, and
    rows whose worker died mid-delivery, of enabled endpoints. Returns how many were attempted."""
    now = timezone.now()
    due = list(WebhookDelivery.objects.filter(_due(now)).order_by("next_attempt_at", "event_id", "id")
               .values_list("id", flat=True)[:limit])
    attempted = 0
    for delivery_id in due:
        if webhook_deliver(delivery_id=delivery_id) is not None:
            attempted += 1
    return attempted
