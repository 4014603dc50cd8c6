"""Integrations: idempotency records of the REST API, integration events (the webhook source and
the event feed), webhook endpoints, deliveries and their attempt log (ADR 0009)."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models


class IdempotencyRecord(models.Model):
    """One unsafe API request made with an `Idempotency-Key`, per credential. Claimed (inserted)
    before the request runs, so a concurrent copy hits the unique constraint instead of acting
    twice; completed with the response to replay."""

    owner = models.CharField(max_length=40, help_text="The credential: key:<ApiKey id> or user:<User id>.")
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of method, path and body.")
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=300)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    response_headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="idempotency_owner_key_unique")]
        indexes = [models.Index(fields=["expires_at"])]

    def __str__(self) -> str:
        return f"{self.owner} {self.key} {self.method} {self.path} -> {self.response_status or 'in progress'}"


class EventType(models.TextChoices):
    """Every change an integrator mirrors, one type each; integrations.catalogue describes each
    type, the audit actions it comes from and an example payload. `case.changed` and
    `proposal.decided` are the former umbrella types, kept so existing subscriptions and feed
    filters keep working (ADR 0028); no new event carries them."""

    CASE_CREATED = "case.created", "Case created"
    CASE_UPDATED = "case.updated", "Case updated"
    CASE_TRANSITIONED = "case.transitioned", "Case transitioned"
    CASE_ASSIGNED = "case.assigned", "Case assigned"
    EVIDENCE_ADDED = "evidence.added", "Evidence added"
    EVIDENCE_EXTRACTED = "evidence.extracted", "Evidence text extracted"
    PROPOSAL_CREATED = "proposal.created", "Proposal created"
    PROPOSAL_APPROVED = "proposal.approved", "Proposal approved"
    PROPOSAL_REJECTED = "proposal.rejected", "Proposal rejected"
    PROPOSAL_STALED = "proposal.staled", "Proposal staled"
    PROPOSAL_WITHDRAWN = "proposal.withdrawn", "Proposal withdrawn"
    NOTICE_DRAFTED = "notice.drafted", "Notice drafted"
    NOTICE_SUBMITTED = "notice.submitted", "Notice submitted"
    NOTICE_APPROVED = "notice.approved", "Notice approved"
    NOTICE_REJECTED = "notice.rejected", "Notice rejected"
    NOTICE_WITHDRAWN = "notice.withdrawn", "Notice withdrawn"
    NOTICE_DISPATCHED = "notice.dispatched", "Notice dispatched"
    NOTICE_SENT = "notice.sent", "Notice sent"
    NOTICE_FAILED = "notice.failed", "Notice failed"
    NOTICE_UNKNOWN = "notice.unknown", "Notice outcome unknown"
    NOTICE_SETTLED = "notice.settled", "Notice settled"
    RUN_STARTED = "run.started", "Run started"
    RUN_FINISHED = "run.finished", "Run finished"
    RUN_FAILED = "run.failed", "Run failed"
    DEADLINE_CROSSED = "deadline.crossed", "Deadline crossed"
    CASE_CHANGED = "case.changed", "Case changed (deprecated: any case.* type)"
    PROPOSAL_DECIDED = "proposal.decided", "Proposal decided (deprecated: proposal.approved or proposal.rejected)"
    PING = "ping", "Ping (a test event sent to one endpoint, never in the feed)"


class IntegrationEvent(models.Model):
    """An event integrations may receive, written in the transaction of the change (from its audit
    event). `feed_sequence` is given after commit, in commit order, by events.feed_assign(): the
    feed's cursor, so a poller never skips an event that committed late (ADR 0009)."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    type = models.CharField(max_length=40, choices=EventType.choices)
    # No database constraint: audit events are append-only (never deleted), and audit_verify's tamper
    # tests delete rows on purpose; the reference must not make that fail differently.
    audit_event = models.OneToOneField("audit.AuditEvent", on_delete=models.DO_NOTHING, related_name="+",
                                       db_constraint=False)
    data = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    occurred_at = models.DateTimeField()
    feed_sequence = models.PositiveBigIntegerField(null=True, blank=True, unique=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["tenant", "feed_sequence"])]

    def __str__(self) -> str:
        return f"{self.type} #{self.pk}"


class FeedCounter(models.Model):
    """The last feed sequence given; its row is locked while sequences are assigned."""

    name = models.CharField(max_length=20, unique=True)
    value = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class WebhookEndpoint(models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="webhook_endpoints")
    url = models.URLField(max_length=500)
    description = models.CharField(max_length=200, blank=True)
    event_types = models.JSONField(default=list, help_text="Event types delivered to this endpoint.")
    secret = models.CharField(max_length=80, help_text="HMAC-SHA256 signing secret (shown once at creation).")
    previous_secret = models.CharField(max_length=80, blank=True,
                                       help_text="The secret before the last rotation, stored like `secret`; "
                                                 "deliveries are signed with it too until it expires.")
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=300, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    failing_since = models.DateTimeField(null=True, blank=True,
                                         help_text="When the current streak of failed attempts began (the first "
                                                   "failure after a success); empty while deliveries succeed.")
    deleted_at = models.DateTimeField(null=True, blank=True,
                                      help_text="Deleted: gone from the API and never delivered to again; the row "
                                                "stays (secrets erased) so its delivery log is kept.")
    created_by = models.ForeignKey("accounts.User", on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERING = "delivering", "Delivering"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed (attempts exhausted)"
    CANCELLED = "cancelled", "Cancelled (the endpoint was deleted)"


class DeliveryError(models.TextChoices):
    """Why an attempt failed, in a word: all an API user learns (never the receiver's body nor the
    raw error text, which could map the operator's network). The worker log holds the detail."""

    REFUSED_ADDRESS = "refused_address", "The host is or resolves to an address webhooks may not reach"
    INVALID_URL = "invalid_url", "The URL is not allowed (scheme, credentials, port)"
    DNS = "dns", "The host name did not resolve"
    CONNECT = "connect", "No connection could be made"
    TIMEOUT = "timeout", "The receiver did not answer in time"
    TLS = "tls", "The TLS handshake or certificate check failed"
    PROTOCOL = "protocol", "The receiver's answer was not HTTP"
    REDIRECT = "redirect", "The receiver answered with a redirect (never followed)"
    HTTP_STATUS = "http_status", "The receiver answered with a status other than 2xx"
    DISABLED = "disabled", "The endpoint was disabled"


class WebhookDelivery(models.Model):
    """The durable intent to deliver one event to one endpoint, written in the transaction of the
    change. A beat task polls for due rows, so nothing is lost while the broker is down."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(IntegrationEvent, on_delete=models.PROTECT, related_name="deliveries")
    status = models.CharField(max_length=20, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0, help_text="Attempts since created or redelivered.")
    next_attempt_at = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error_category = models.CharField(max_length=20, choices=DeliveryError.choices, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["endpoint", "event"], name="delivery_endpoint_event_unique")]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.event} to {self.endpoint} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt of a delivery: its status code, duration and error category. Neither the
    receiver's body nor the raw error text is stored (ADR 0015)."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error_category = models.CharField(max_length=20, choices=DeliveryError.choices, blank=True)
    succeeded = models.BooleanField(default=False)

    class Meta:
        ordering = ["delivery_id", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="attempt_delivery_number_unique")]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}: {self.status_code or self.error_category}"
