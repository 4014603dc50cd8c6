"""Domain state: cases, evidence, proposals, notices, approvals and the case event log.

Models hold fields, constraints and FSM transitions (in-memory state changes only). Every write
goes through cases.services; nothing else assigns a status (the FSM fields are protected)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMField, FSMFieldMixin, transition

from cases import policy
from core.hashing import canonical_json, sha256_hex


class CaseStatus(models.TextChoices):
    NEW = "new", "New"
    TRIAGED = "triaged", "Triaged"
    UNDER_REVIEW = "under_review", "Under review"
    WAITING_FOR_EVIDENCE = "waiting_for_evidence", "Waiting for evidence"
    READY_FOR_DECISION = "ready_for_decision", "Ready for decision"
    DECIDED = "decided", "Decided"
    CLOSED = "closed", "Closed"


class RiskLevel(models.TextChoices):
    UNASSESSED = "unassessed", "Unassessed"
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"


RISK_ORDER = [RiskLevel.LOW, RiskLevel.MEDIUM, RiskLevel.HIGH, RiskLevel.CRITICAL]


def _role_permission(transition_name: str):
    """FSM `permission=` callable: consults the policy matrix. The services call
    django_fsm.has_transition_perm with it, since calling a transition does not enforce it."""

    def check(instance, user) -> bool:
        if user is None or not getattr(user, "is_authenticated", False):
            return False
        if getattr(user, "tenant_id", None) != instance.tenant_id:
            return False
        return policy.role_may_transition(getattr(user, "role", None), transition_name)

    check.__name__ = f"may_{transition_name}"
    return check


def _risk_assessed(case: Case) -> bool:
    return case.risk_level != RiskLevel.UNASSESSED


def _no_notice_in_flight(case: Case) -> bool:
    return not case.notices.filter(status__in=NoticeStatus.in_flight()).exists()


def _no_notice_unsettled(case: Case) -> bool:
    return not case.notices.filter(status__in=NoticeStatus.unsettled()).exists()


def _notices_in(case: Case, statuses: list[str]) -> str:
    """Which notices hold a condition up, and what settles an unsettled one (issue 12)."""
    parts = []
    for pk, status in case.notices.filter(status__in=statuses).order_by("id").values_list("pk", "status")[:5]:
        if status in NoticeStatus.unsettled():
            parts.append(f"N{pk} is {status}: whether its email went out is unknown — settle it from the mail "
                         f"log (admin action, or manage.py notice_settle {pk} --sent/--failed --reason ...)")
        else:
            parts.append(f"N{pk} is {NoticeStatus(status).label.lower()}")
    return "; ".join(parts)


_risk_assessed.hint = "the case's risk level must be assessed first"
_no_notice_in_flight.hint = "no notice may be awaiting approval or being sent"
_no_notice_in_flight.explain = lambda case: (f"{_no_notice_in_flight.hint} "
                                             f"({_notices_in(case, NoticeStatus.in_flight())})")
_no_notice_unsettled.hint = "no notice may be unsettled (sending or unknown)"
_no_notice_unsettled.explain = lambda case: (f"{_no_notice_unsettled.hint} "
                                             f"({_notices_in(case, NoticeStatus.unsettled())})")


class ThreadSafeRefreshMixin:
    """refresh_from_db for models with protected FSM fields, safe under threads.

    django-fsm-2 lets refresh_from_db write a protected field by setting `protected = False` on the
    *field* — shared by every instance in every thread — and back to True afterwards. Two threads
    refreshing at once re-protect the field under each other (AttributeError in the middle of a
    service, which rolls the whole change back), and while one of them has it lifted, any thread
    may assign the status directly. The descriptor only refuses a value already in the instance's
    __dict__, so this reload takes the protected values out of this one instance and lets Django
    set them again: protection is never lifted for anybody else."""

    def refresh_from_db(self, using=None, fields=None, from_queryset=None):
        reload_all = fields is None
        if reload_all:
            # Name the loaded fields explicitly: once popped below, Django would take the protected
            # ones for deferred fields and skip them.
            deferred = self.get_deferred_fields()
            fields = [f.attname for f in self._meta.concrete_fields if f.attname not in deferred]
        requested = set(fields)
        protected = [f.attname for f in self._meta.concrete_fields if isinstance(f, FSMFieldMixin) and f.protected]
        # All of them, not only the requested ones: ConcurrentTransitionMixin.__init__ reads the state
        # fields, so the row Django reloads from always carries them and Django copies them over.
        held = {name: self.__dict__.pop(name) for name in protected if name in self.__dict__}
        try:
            models.Model.refresh_from_db(self, using=using, fields=fields, from_queryset=from_queryset)
        except BaseException:
            self.__dict__.update(held)
            raise
        for name, value in held.items():
            if name not in requested or name not in self.__dict__:
                self.__dict__[name] = value  # not asked for: keep the value this instance had
        if reload_all:  # what Django does itself when no fields are named
            self._prefetched_objects_cache = {}
            for relation in self._meta.related_objects:
                if relation.is_cached(self):
                    relation.delete_cached_value(self)
        self._update_initial_state()  # ConcurrentTransitionMixin: the reloaded states are the new baseline


class Case(ThreadSafeRefreshMixin, ConcurrentTransitionMixin, models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="cases")
    reference = models.CharField(max_length=40)
    title = models.CharField(max_length=300)
    product = models.CharField(max_length=200, blank=True)
    sub_product = models.CharField(max_length=200, blank=True)
    issue = models.CharField(max_length=300, blank=True)
    sub_issue = models.CharField(max_length=300, blank=True)
    company = models.CharField(max_length=200, blank=True, help_text="The respondent.")
    consumer_state = models.CharField(max_length=10, blank=True)
    tags = models.CharField(max_length=200, blank=True)
    # Personal data: redacted from model contexts, never written to checkpoints.
    complainant_name = models.CharField(max_length=200, blank=True)
    complainant_email = models.EmailField(blank=True)
    source = models.CharField(max_length=100, blank=True)
    source_reference = models.CharField(max_length=100, blank=True)
    received_at = models.DateField(null=True, blank=True)

    status = FSMField(max_length=30, choices=CaseStatus.choices, default=CaseStatus.NEW, protected=True)
    risk_level = models.CharField(max_length=20, choices=RiskLevel.choices, default=RiskLevel.UNASSESSED)
    assigned_team = models.CharField(max_length=100, blank=True)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                 related_name="assigned_cases")
    resolution = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "reference"], name="case_reference_unique_per_tenant"),
        ]
        indexes = [models.Index(fields=["tenant", "status"])]

    def __str__(self) -> str:
        return f"{self.reference} {self.title[:60]}"

    # --- Lifecycle (DESIGN §3). In-memory only; cases.services.case_transition commits. ---
    @transition(field=status, source=CaseStatus.NEW, target=CaseStatus.TRIAGED,
                permission=_role_permission("triage"))
    def triage(self):
        pass

    @transition(field=status, source=CaseStatus.TRIAGED, target=CaseStatus.UNDER_REVIEW,
                permission=_role_permission("start_review"))
    def start_review(self):
        pass

    @transition(field=status, source=CaseStatus.UNDER_REVIEW, target=CaseStatus.WAITING_FOR_EVIDENCE,
                permission=_role_permission("request_evidence"))
    def request_evidence(self):
        pass

    @transition(field=status, source=CaseStatus.WAITING_FOR_EVIDENCE, target=CaseStatus.UNDER_REVIEW,
                permission=_role_permission("receive_evidence"))
    def receive_evidence(self):
        pass

    @transition(field=status, source=CaseStatus.UNDER_REVIEW, target=CaseStatus.READY_FOR_DECISION,
                permission=_role_permission("mark_ready"), conditions=[_risk_assessed])
    def mark_ready(self):
        pass

    @transition(field=status, source=CaseStatus.READY_FOR_DECISION, target=CaseStatus.UNDER_REVIEW,
                permission=_role_permission("return_to_review"))
    def return_to_review(self):
        pass

    @transition(field=status, source=CaseStatus.READY_FOR_DECISION, target=CaseStatus.DECIDED,
                permission=_role_permission("decide"), conditions=[_risk_assessed, _no_notice_unsettled])
    def decide(self):
        pass

    @transition(field=status, source=CaseStatus.DECIDED, target=CaseStatus.CLOSED,
                permission=_role_permission("close"), conditions=[_no_notice_in_flight])
    def close(self):
        pass

    @transition(field=status, source=[CaseStatus.CLOSED, CaseStatus.DECIDED], target=CaseStatus.UNDER_REVIEW,
                permission=_role_permission("reopen"))
    def reopen(self):
        pass


CASE_TRANSITIONS = ("triage", "start_review", "request_evidence", "receive_evidence", "mark_ready",
                    "return_to_review", "decide", "close", "reopen")


class CaseReferenceCounter(models.Model):
    """Per-tenant, per-year counter behind CASE-YYYY-NNNNNN references (row-locked on use)."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    year = models.PositiveIntegerField()
    value = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "year"], name="case_counter_unique")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.year}: {self.value}"


class ImmutableModel(models.Model):
    """Rows written once. Updates through the ORM are refused; corrections are new rows."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValueError(f"{type(self).__name__} rows are immutable once written.")
        super().save(*args, **kwargs)


def evidence_upload_path(instance: Evidence, filename: str) -> str:
    return f"evidence/{instance.tenant_id}/{instance.case_id}/{instance.sha256[:16]}-{filename}"


class EvidenceKind(models.TextChoices):
    TEXT = "text", "Text"
    FILE = "file", "File"


class Evidence(ImmutableModel):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="evidence")
    kind = models.CharField(max_length=10, choices=EvidenceKind.choices)
    title = models.CharField(max_length=300)
    text = models.TextField(blank=True)
    file = models.FileField(upload_to=evidence_upload_path, blank=True)
    filename = models.CharField(max_length=255, blank=True)
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    source = models.CharField(max_length=200, blank=True)
    added_by = models.CharField(max_length=200)  # actor identifier
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "evidence"

    def __str__(self) -> str:
        return f"E{self.pk} {self.title}"

    def read_text(self, limit: int | None = None) -> str:
        """The evidence as text (files decoded as UTF-8 where they are text)."""
        if self.kind == EvidenceKind.TEXT:
            content = self.text
        elif self.content_type.startswith("text/") or self.content_type == "application/json":
            with self.file.open("rb") as handle:
                content = handle.read(limit * 4 if limit else -1).decode("utf-8", errors="replace")
        else:
            content = f"[{self.content_type} file {self.filename}, {self.size} bytes]"
        return content[:limit] if limit else content


class ProposalKind(models.TextChoices):
    STATUS_TRANSITION = "status_transition", "Status transition"
    RISK_LEVEL = "risk_level", "Risk level"
    ASSIGNMENT = "assignment", "Assignment"


class ProposalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPLIED = "applied", "Applied"
    REJECTED = "rejected", "Rejected"
    WITHDRAWN = "withdrawn", "Withdrawn"
    STALE = "stale", "Stale"


class Proposal(ThreadSafeRefreshMixin, ConcurrentTransitionMixin, models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="proposals")
    kind = models.CharField(max_length=30, choices=ProposalKind.choices)
    # status_transition: {"transition": "mark_ready"}; risk_level: {"risk_level": "high"};
    # assignment: {"team": "...", "assignee_id": 3 | null}
    payload = models.JSONField()
    rationale = models.TextField()
    evidence_refs = models.JSONField(default=list, blank=True)
    proposer_type = models.CharField(max_length=20)
    proposer_id = models.CharField(max_length=200)
    proposed_by_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True,
                                         blank=True, related_name="+")
    # The person on whose request an agent proposed (e.g. a chat "close the case"): they are
    # barred from approving it too, or asking an agent would be a way around four eyes.
    requested_by = models.CharField(max_length=200, blank=True)
    run_id = models.CharField(max_length=64, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    case_version = models.PositiveIntegerField()
    policy_version = models.CharField(max_length=40)
    status = FSMField(max_length=20, choices=ProposalStatus.choices, default=ProposalStatus.PENDING,
                      protected=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "idempotency_key"], name="proposal_idempotency_unique",
                                    condition=models.Q(idempotency_key__isnull=False)),
        ]
        indexes = [models.Index(fields=["tenant", "status"])]

    def __str__(self) -> str:
        return f"P{self.pk} {self.summary}"

    @property
    def summary(self) -> str:
        if self.kind == ProposalKind.STATUS_TRANSITION:
            return f"transition: {self.payload.get('transition')}"
        if self.kind == ProposalKind.RISK_LEVEL:
            return f"risk level → {self.payload.get('risk_level')}"
        return f"assign to {self.payload.get('team') or '—'} / user {self.payload.get('assignee_id') or '—'}"

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.APPLIED)
    def apply(self):
        pass

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.REJECTED)
    def reject(self):
        pass

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.WITHDRAWN)
    def withdraw(self):
        pass

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.STALE)
    def mark_stale(self):
        pass


class NoticeStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    PENDING_APPROVAL = "pending_approval", "Pending approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    WITHDRAWN = "withdrawn", "Withdrawn"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed (retryable)"
    # The message data went out and no final reply came back: the mail server may have it. Never
    # retried automatically; an operator (or a provider's delivery webhook) settles it (issue 12).
    UNKNOWN = "unknown", "Unknown (settle it)"

    @classmethod
    def in_flight(cls) -> list[str]:
        return [cls.PENDING_APPROVAL, cls.APPROVED, cls.SENDING, cls.FAILED, cls.UNKNOWN]

    @classmethod
    def unsettled(cls) -> list[str]:
        """Statuses in which nobody knows whether the email went out."""
        return [cls.SENDING, cls.UNKNOWN]


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


class ApprovalDecision(models.TextChoices):
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


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


class DispatchStatus(models.TextChoices):
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown"


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


class CaseEvent(ImmutableModel):
    """Domain events, numbered per case. Replayed through cases.reducer they rebuild the case."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="events")
    sequence = models.PositiveIntegerField()
    event_type = models.CharField(max_length=60)
    payload = models.JSONField(default=dict)
    case_version = models.PositiveIntegerField(help_text="The case's version after this event.")
    actor_type = models.CharField(max_length=20)
    actor_id = models.CharField(max_length=200)
    run_id = models.CharField(max_length=64, blank=True)
    policy_version = models.CharField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["case_id", "sequence"]
        constraints = [models.UniqueConstraint(fields=["case", "sequence"], name="case_event_sequence_unique")]

    def __str__(self) -> str:
        return f"{self.case_id}#{self.sequence} {self.event_type}"
