"""Bulk intake: an import of a complaints file, and the complaints it has brought in.

A `ComplaintImport` is one file (uploaded on the page, or read in place by `manage.py
import_complaints`) and its progress; an `ImportedComplaint` claims one external complaint id for
a tenant. The claim's unique (tenant, complaint id) is what makes an import idempotent: a second
import of the same complaint inserts no claim, and so opens no case."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ImportStatus(models.TextChoices):
    QUEUED = "queued", "Waiting to start"
    RUNNING = "running", "Importing"
    DONE = "done", "Finished"
    FAILED = "failed", "Stopped"


def import_upload_path(instance, filename: str) -> str:
    return f"imports/{instance.tenant_id}/{filename}"


class ComplaintImport(models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    filename = models.CharField(max_length=255)
    # The uploaded file (page imports); empty for `manage.py import_complaints`, which reads it in place.
    file = models.FileField(upload_to=import_upload_path, blank=True)
    status = models.CharField(max_length=20, choices=ImportStatus.choices, default=ImportStatus.QUEUED)
    # Progress: how far through the file the reader is, in bytes (the row count is known only at the end).
    bytes_total = models.PositiveBigIntegerField(default=0)
    bytes_done = models.PositiveBigIntegerField(default=0)
    rows_read = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    duplicate_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    unknown_columns = models.JSONField(default=list, blank=True)
    error_report = models.FileField(upload_to=import_upload_path, blank=True)
    failure = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    actor_id = models.CharField(max_length=200)  # who started it (user:<pk> or system:<name>)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written with every chunk: a running import whose heartbeat is old lost its worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} {self.filename} ({self.status})"

    @property
    def percent(self) -> int:
        if self.status == ImportStatus.DONE:
            return 100
        if not self.bytes_total:
            return 0
        return min(99, int(100 * self.bytes_done / self.bytes_total))

    @property
    def is_active(self) -> bool:
        return self.status in (ImportStatus.QUEUED, ImportStatus.RUNNING)


class ImportedComplaint(models.Model):
    """One external complaint claimed by a tenant, by the import that opened its case."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    complaint_id = models.CharField(max_length=32)
    complaint_import = models.ForeignKey(ComplaintImport, on_delete=models.PROTECT, related_name="claims")
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "complaint_id"],
                                               name="imported_complaint_unique_per_tenant")]

    def __str__(self) -> str:
        return f"complaint {self.complaint_id}"


# --- E-mail intake --------------------------------------------------------------------------

class InboundStatus(models.TextChoices):
    ACCEPTED = "accepted", "Accepted"
    REFUSED = "refused", "Refused"


class InboundMessage(models.Model):
    """One e-mail received through the provider's inbound webhook, once its signature checked out.

    The unique (tenant, message key) is the replay guard: the key is the Message-ID header, or the
    sha256 of the message when it has none, so the same message delivered twice is one row, one
    case or one set of evidence. A refused message keeps its row with the reason in words."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    message_key = models.CharField(max_length=300)
    provider = models.CharField(max_length=40)
    sender = models.CharField(max_length=254, blank=True)
    recipient = models.CharField(max_length=254, blank=True)
    subject = models.CharField(max_length=300, blank=True)
    size = models.PositiveIntegerField(default=0)
    spam_score = models.FloatField(null=True, blank=True)
    attachment_count = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=InboundStatus.choices)
    reason = models.TextField(blank=True)
    case = models.ForeignKey("cases.Case", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    opened_case = models.BooleanField(default=False)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "message_key"],
                                               name="inbound_message_unique_per_tenant")]

    def __str__(self) -> str:
        return f"e-mail from {self.sender} ({self.status})"
