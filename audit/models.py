"""The append-only audit ledger. This app imports nothing else of ours: it is the
lowest layer (docs/architecture.md, "Apps and their layers")."""

from django.db import models

from audit.hashing import event_hash


class AppendOnlyError(Exception):
    pass


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError("Audit events are append-only: they cannot be updated.")

    def delete(self):
        raise AppendOnlyError("Audit events are append-only: they cannot be deleted.")


class AuditStreamHead(models.Model):
    """The head of one hash chain. Locked (SELECT ... FOR UPDATE) by the writer so that two
    transactions never append to the same stream at once; other streams are not blocked."""

    stream = models.CharField(max_length=100, unique=True)
    last_sequence = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, default="")

    def __str__(self) -> str:
        return f"{self.stream}@{self.last_sequence}"


class AuditVerifiedHead(models.Model):
    """The last event of a stream that `audit_verify` found intact (ADR 0010): `audit_verify
    --since` resumes each stream here, so a nightly verification costs what was appended since.
    Written by audit.verify only; not part of the ledger (it can be deleted to force a full walk)."""

    stream = models.CharField(max_length=100, unique=True)
    sequence = models.PositiveBigIntegerField()
    hash = models.CharField(max_length=64)
    verified_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.stream} verified to {self.sequence}"


class AuditEvent(models.Model):
    # No index of its own (every index is written on each step's event, ADR 0010): the timeline
    # index below leads with the tenant.
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+",
                               null=True, blank=True, db_index=False)
    stream = models.CharField(max_length=100)
    sequence = models.PositiveBigIntegerField()
    actor_type = models.CharField(max_length=20)  # user | agent | system
    actor_id = models.CharField(max_length=200)
    action = models.CharField(max_length=100)  # dotted, past tense: cases.case.transitioned
    target_type = models.CharField(max_length=60, blank=True)
    target_id = models.CharField(max_length=100, blank=True)
    run_id = models.CharField(max_length=64, blank=True)
    policy_version = models.CharField(max_length=40, blank=True)
    decision = models.CharField(max_length=40, blank=True)  # allowed | denied | approved | rejected ...
    evidence_refs = models.JSONField(default=list, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)
    # The audit key the hash is an HMAC under (ADR 0017); "" for events written before the ledger
    # was keyed, whose hash is a plain SHA-256.
    key_id = models.CharField(max_length=40, blank=True, default="", db_default="")

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["stream", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["stream", "sequence"], name="audit_event_stream_sequence_unique"),
        ]
        # (tenant, created_at, id): the timeline's keyset order and any tenant filter. The action
        # filter is a prefix, served on PostgreSQL by web's `action varchar_pattern_ops` index
        # (which serves equality too); SQLite, with smaller ledgers, scans.
        indexes = [
            models.Index(fields=["tenant", "created_at", "id"], name="audit_event_timeline"),
            models.Index(fields=["target_type", "target_id"]),
            models.Index(fields=["run_id"]),
        ]

    def __str__(self) -> str:
        return f"{self.stream}#{self.sequence} {self.action}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("Audit events are append-only: they cannot be updated.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("Audit events are append-only: they cannot be deleted.")

    def compute_hash(self) -> str:
        return event_hash(self)
