"""Notices to the consumer, the approvals people give (to notices and proposals), and the one dispatch
of each notice."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from cases.models.base import ThreadSafeRefreshMixin
from cases.models.case import Case
from cases.models.choices import ApprovalDecision, DispatchStatus, NoticeStatus
from cases.models.proposals import Proposal
from core.hashing import canonical_json, sha256_hex


def notice_content_hash(*, recipient: str, subject: str, body: str) -> str:
    return sha256_hex(canonical_json({"recipient": recipient, "subject": subject, "body": body}))


class Notice(ThreadSafeRefreshMixin, ConcurrentTransitionMixin, models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="notices")
    kind = models.CharField(max_length=50, default="response")
    recipient = models.EmailField()
    subject = models.CharField(max_length=300)
    body = models.TextField()
    content_hash = models.CharField(max_length=64)
    status = FSMField(max_length=20, choices=NoticeStatus.choices, default=NoticeStatus.DRAFT, protected=True)
    drafted_by = models.CharField(max_length=200)  # actor identifier
    last_edited_by = models.CharField(max_length=200)
    submitted_by = models.CharField(max_length=200, blank=True)
    requested_by = models.CharField(max_length=200, blank=True)  # see Proposal.requested_by
    run_id = models.CharField(max_length=64, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    # The notice checker's result (cases/notice_checker.py), for the content hash it was
    # computed on: [{"code", "message"}, ...]; empty = no flag.
    consumer_request = models.TextField(blank=True, help_text="The consumer's request the notice must address.")
    check_flags = models.JSONField(default=list, blank=True)
    checked_hash = models.CharField(max_length=64, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    external_message_id = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "idempotency_key"], name="notice_idempotency_unique",
                                    condition=models.Q(idempotency_key__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"N{self.pk} {self.subject[:60]}"

    def compute_content_hash(self) -> str:
        return notice_content_hash(recipient=self.recipient, subject=self.subject, body=self.body)

    @property
    def is_checked(self) -> bool:
        """The stored check is for the current text."""
        return bool(self.checked_hash) and self.checked_hash == self.content_hash

    @transition(field=status, source=NoticeStatus.DRAFT, target=NoticeStatus.PENDING_APPROVAL)
    def submit(self):
        pass

    @transition(field=status, source=NoticeStatus.PENDING_APPROVAL, target=NoticeStatus.APPROVED)
    def approve(self):
        pass

    @transition(field=status, source=NoticeStatus.PENDING_APPROVAL, target=NoticeStatus.REJECTED)
    def reject(self):
        pass

    @transition(field=status, source=[NoticeStatus.DRAFT, NoticeStatus.PENDING_APPROVAL, NoticeStatus.APPROVED,
                                      NoticeStatus.REJECTED], target=NoticeStatus.DRAFT)
    def edit(self):
        pass

    @transition(field=status, source=[NoticeStatus.DRAFT, NoticeStatus.PENDING_APPROVAL, NoticeStatus.APPROVED,
                                      NoticeStatus.REJECTED, NoticeStatus.FAILED], target=NoticeStatus.WITHDRAWN)
    def withdraw(self):
        pass

    @transition(field=status, source=[NoticeStatus.APPROVED, NoticeStatus.FAILED], target=NoticeStatus.SENDING)
    def start_sending(self):
        pass

    @transition(field=status, source=NoticeStatus.SENDING, target=NoticeStatus.SENT)
    def mark_sent(self):
        pass

    @transition(field=status, source=NoticeStatus.SENDING, target=NoticeStatus.FAILED)
    def mark_failed(self):
        pass

    @transition(field=status, source=NoticeStatus.SENDING, target=NoticeStatus.UNKNOWN)
    def mark_unknown(self):
        pass

    # An operator's (or a provider webhook's) verdict on a notice whose outcome nobody recorded:
    # `unknown`, or `sending` stuck because its worker died (cases.services.dispatch.notice_settle).
    @transition(field=status, source=[NoticeStatus.SENDING, NoticeStatus.UNKNOWN], target=NoticeStatus.SENT)
    def settle_sent(self):
        pass

    @transition(field=status, source=[NoticeStatus.SENDING, NoticeStatus.UNKNOWN], target=NoticeStatus.FAILED)
    def settle_failed(self):
        pass


class Approval(models.Model):
    """A person's decision, bound to what they saw: the notice's content hash or the proposal's
    case version, and the policy version in force."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    notice = models.ForeignKey(Notice, on_delete=models.PROTECT, null=True, blank=True, related_name="approvals")
    proposal = models.ForeignKey(Proposal, on_delete=models.PROTECT, null=True, blank=True,
                                 related_name="approvals")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decision = models.CharField(max_length=20, choices=ApprovalDecision.choices)
    content_hash = models.CharField(max_length=64, blank=True)
    case_version = models.PositiveIntegerField()
    policy_version = models.CharField(max_length=40)
    note = models.TextField(blank=True)
    # Notice approvals over the notice checker's flags (a date before today, an unrecorded action …):
    # the flags the approver saw and the reason they gave for approving anyway.
    flags_overridden = models.JSONField(default=list, blank=True)
    override_reason = models.TextField(blank=True)
    # Proposal approvals: the evidence ids listed on the page the approver decided from.
    evidence_in_view = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(notice__isnull=False, proposal__isnull=True)
                           | models.Q(notice__isnull=True, proposal__isnull=False)),
                name="approval_targets_one_thing",
            ),
        ]

    @property
    def is_valid(self) -> bool:
        return self.decision == ApprovalDecision.APPROVED and self.voided_at is None

    def __str__(self) -> str:
        target = f"N{self.notice_id}" if self.notice_id else f"P{self.proposal_id}"
        return f"{self.decision} {target} by {self.approver_id}"


class NoticeDispatch(models.Model):
    """The one dispatch of a notice. The unique notice column is what makes sending exactly-once:
    a second dispatcher cannot create another row, and retries reuse this one."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    notice = models.OneToOneField(Notice, on_delete=models.PROTECT, related_name="dispatch")
    approval = models.ForeignKey(Approval, on_delete=models.PROTECT, related_name="+")
    content_hash = models.CharField(max_length=64)
    message_id = models.CharField(max_length=300, unique=True)
    status = models.CharField(max_length=20, choices=DispatchStatus.choices, default=DispatchStatus.SENDING)
    attempts = models.PositiveIntegerField(default=0)
    dispatched_by = models.CharField(max_length=200)
    started_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        verbose_name_plural = "notice dispatches"

    def __str__(self) -> str:
        return f"dispatch N{self.notice_id} {self.status}"
