"""Domain state: cases, evidence, proposals, notices, approvals and the case event log.

Models hold fields, constraints and FSM transitions (in-memory state changes only). Every write
goes through cases.services; nothing else assigns a status (the FSM fields are protected)."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Coalesce, Least
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


# The case lifecycle in one place: every list of statuses below is derived from CaseStatus, so a new
# state is added to the enum (in its place in the order) and to the transitions, and nothing else.
# Settled: decided or closed — no deadline runs and no proposal may change the case.
SETTLED_STATUSES = frozenset({CaseStatus.DECIDED, CaseStatus.CLOSED})
# Open: every state that is not settled; the queue's "open" filter and the deadlines use it.
OPEN_STATUSES = frozenset(CaseStatus) - SETTLED_STATUSES
# Terminal: no transition leads out of it except reopening.
TERMINAL_STATUSES = frozenset({CaseStatus.CLOSED})
# Sort rank of each status for the queue (the order of declaration), used by cases.selectors and the
# index migration web/0002 (tests/cases/test_lifecycle.py checks the migration's copy is equal).
STATUS_RANK = {status.value: rank for rank, status in enumerate(CaseStatus)}


def is_settled(status: str) -> bool:
    return status in SETTLED_STATUSES


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
    """Which notices hold a condition up, and what settles an unsettled one."""
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


class CaseQuerySet(models.QuerySet):
    def with_deadlines(self):
        """Annotate `notice_sent` and `computed_next_due`: the rule the stored `Case.next_due` follows
        (next_due_expression), evaluated from the rows it depends on. The two are equal for every
        case written through the services (tests/cases/test_next_due.py); sort on the stored column."""
        notice_sent = models.Exists(Notice.objects.filter(case=models.OuterRef("pk"), status=NoticeStatus.SENT))
        return self.annotate(notice_sent=notice_sent).annotate(
            computed_next_due=next_due_expression(notice_sent=models.Q(notice_sent=True)))


def next_due_expression(*, notice_sent) -> models.Expression:
    """The earliest due date still open, as SQL: acknowledgement and response until a notice is
    sent, closure until the case is decided or closed; NULL when none (the rule of
    cases.services.deadlines.next_due_of). `notice_sent` is a condition on the case row."""
    settled = models.Q(status__in=sorted(SETTLED_STATUSES))
    open_notice = models.Case(models.When(notice_sent, then=models.Value(None)),
                              default=_least("acknowledge_due", "response_due"), output_field=models.DateField())
    open_close = models.Case(models.When(settled, then=models.Value(None)), default=models.F("close_due"),
                             output_field=models.DateField())
    return _least(open_notice, open_close)


def _least(a, b):
    """LEAST ignoring NULLs on every database (SQLite's MIN() of a NULL is NULL; PostgreSQL's
    LEAST skips them): each side is coalesced with the other."""
    return Least(Coalesce(a, b), Coalesce(b, a), output_field=models.DateField())


# The queue's due-date sort keys (cases.selectors.CASE_SORTS): the stored next_due with "no open due
# date" last in either direction — the latest possible date ascending, the earliest descending. Each
# has its (tenant, key, id) index in Case.Meta, built from these same expressions (an expression index
# serves only a query whose expression compiles to the same SQL).
NO_DUE_LAST_ASCENDING = date(9999, 12, 31)
NO_DUE_LAST_DESCENDING = date(1, 1, 1)


def next_due_sort_key(*, descending: bool) -> Coalesce:
    return Coalesce("next_due", models.Value(NO_DUE_LAST_DESCENDING if descending else NO_DUE_LAST_ASCENDING),
                    output_field=models.DateField())


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
    # Deadlines: computed at intake from the tenant's DeadlinePolicy, changed only by
    # cases.services.deadlines (a `case.deadlines_changed` event each time), replayed like the rest.
    acknowledge_due = models.DateField(null=True, blank=True)
    response_due = models.DateField(null=True, blank=True)
    close_due = models.DateField(null=True, blank=True)
    deadline_policy_version = models.PositiveIntegerField(null=True, blank=True)
    # Set while the clock is paused (waiting for evidence, when the policy says so).
    deadline_paused_on = models.DateField(null=True, blank=True)
    # Derived, stored for the queue's due-date sort: the earliest due date still open
    # (next_due_expression). Written only by cases.services.deadlines.recompute_next_due, which every
    # service that changes a due date, the status or a notice's sending calls in its transaction.
    next_due = models.DateField(null=True, blank=True, editable=False)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = CaseQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "reference"], name="case_reference_unique_per_tenant"),
        ]
        indexes = [
            models.Index(fields=["tenant", "status"]),
            # The queue's due-date sort, both directions, and the overdue view (next_due_sort_key).
            models.Index(models.F("tenant"), next_due_sort_key(descending=False), models.F("id"),
                         name="case_next_due_asc_key"),
            models.Index(models.F("tenant"), next_due_sort_key(descending=True), models.F("id"),
                         name="case_next_due_desc_key"),
        ]

    def __str__(self) -> str:
        return f"{self.reference} {self.title[:60]}"

    def deadline_states(self, *, today=None, due_soon_days: int | None = None) -> list:
        """Each due date with its state (met / on time / due soon / overdue): cases.deadlines."""
        from cases.deadlines import case_deadline_states

        return case_deadline_states(self, today=today, due_soon_days=due_soon_days)

    # --- Lifecycle (docs/architecture.md, "Lifecycles"). In-memory only; cases.services.case_transition commits. ---
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
# The transitions in words, for every text a person reads (forms, pages, an agent's rationale).
TRANSITION_LABELS = {
    "triage": "Triage",
    "start_review": "Start review",
    "request_evidence": "Request evidence",
    "receive_evidence": "Evidence received",
    "mark_ready": "Mark ready for decision",
    "return_to_review": "Return to review",
    "decide": "Decide",
    "close": "Close",
    "reopen": "Reopen",
}


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
        """The evidence as text (files decoded as UTF-8 where they are text; a PDF's extracted text,
        or a line saying why the agents cannot read it)."""
        if self.kind == EvidenceKind.TEXT:
            content = self.text
        elif self.content_type.startswith("text/") or self.content_type == "application/json":
            with self.file.open("rb") as handle:
                content = handle.read(limit * 4 if limit else -1).decode("utf-8", errors="replace")
        elif self.content_type == "application/pdf":
            content = self._pdf_text()
        else:
            content = f"[{self.content_type} file {self.filename}, {self.size} bytes]"
        return content[:limit] if limit else content

    @property
    def extraction_or_none(self) -> EvidenceExtraction | None:
        try:
            return self.extraction
        except EvidenceExtraction.DoesNotExist:
            return None

    def _pdf_text(self) -> str:
        extraction = self.extraction_or_none
        if extraction is not None and extraction.status == ExtractionStatus.READABLE:
            return extraction.text
        if extraction is not None and extraction.status == ExtractionStatus.UNREADABLE:
            return f"[{self.content_type} file {self.filename}, {self.size} bytes: {extraction.status_message}]"
        return f"[{self.content_type} file {self.filename}, {self.size} bytes: text extraction pending]"

    def page_for_offset(self, offset: int) -> int | None:
        """The 1-based page of the PDF on which character `offset` of `read_text()` falls (None
        when the evidence has no extracted pages)."""
        extraction = self.extraction_or_none
        return extraction.page_for_offset(offset) if extraction is not None else None


class ExtractionStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    READABLE = "readable", "Readable"
    UNREADABLE = "unreadable", "Not readable by the agents"


class EvidenceExtraction(models.Model):
    """The text extracted from a file evidence (PDF: cases/extraction.py), kept beside the
    immutable Evidence row: its own sha256 (of the text) and where each page starts in it.
    One row per evidence (unique), written pending at upload and completed once by the worker."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    evidence = models.OneToOneField(Evidence, on_delete=models.PROTECT, related_name="extraction")
    status = models.CharField(max_length=20, choices=ExtractionStatus.choices, default=ExtractionStatus.PENDING)
    reason = models.CharField(max_length=300, blank=True, help_text="Why the agents cannot read it.")
    text = models.TextField(blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    page_offsets = models.JSONField(default=list, blank=True, help_text="Character offset where each page starts.")
    page_count = models.PositiveIntegerField(default=0)
    extractor = models.CharField(max_length=60, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"extraction E{self.evidence_id} {self.status}"

    @property
    def status_message(self) -> str:
        if self.status == ExtractionStatus.UNREADABLE:
            return f"not readable by the agents: {self.reason}"
        if self.status == ExtractionStatus.PENDING:
            return "text extraction pending"
        return f"text extracted ({self.page_count} page{'s' if self.page_count != 1 else ''})"

    def page_for_offset(self, offset: int) -> int | None:
        if self.status != ExtractionStatus.READABLE or not self.page_offsets or offset < 0 or offset > len(self.text):
            return None
        from bisect import bisect_right

        return bisect_right(self.page_offsets, offset)


class ProposalKind(models.TextChoices):
    STATUS_TRANSITION = "status_transition", "Status transition"
    RISK_LEVEL = "risk_level", "Risk level"
    ASSIGNMENT = "assignment", "Assignment"


# The case fields a proposal of each kind depends on (reads or writes), and the event types that
# change each field: staleness by precondition (ADR 0006).
PROPOSAL_PRECONDITION_FIELDS: dict[str, tuple[str, ...]] = {
    ProposalKind.STATUS_TRANSITION: ("status",),
    ProposalKind.RISK_LEVEL: ("risk_level",),
    ProposalKind.ASSIGNMENT: ("assigned_team", "assignee_id"),
}
PRECONDITION_EVENTS: dict[str, tuple[str, ...]] = {
    "status": ("case.transitioned",),
    "risk_level": ("case.risk_changed",),
    "assigned_team": ("case.assigned",),
    "assignee_id": ("case.assigned",),
}
PRECONDITION_LABELS = {"status": "status", "risk_level": "risk level", "assigned_team": "assigned team",
                       "assignee_id": "assignee"}


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
    # What the proposal depends on (ADR 0006): the case fields it reads or writes with
    # their values when it was made, e.g. {"status": "triaged"} or {"risk_level": "unassessed"}.
    # Approval re-checks only these; see cases.services.proposals.
    preconditions = models.JSONField(default=dict, blank=True)
    # Why it went stale: {"field", "from", "to", "event_id", "event_sequence", "event_type", "actor_id"}.
    stale_reason = models.JSONField(default=dict, blank=True)
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
    def is_stale(self) -> bool:
        return self.status == ProposalStatus.STALE

    def changed_preconditions(self, case: Case) -> list[tuple[str, object, object]]:
        """(field, value when proposed, value now) for each precondition the case no longer meets."""
        return [(name, expected, getattr(case, name)) for name, expected in (self.preconditions or {}).items()
                if getattr(case, name) != expected]

    @property
    def stale_message(self) -> str:
        """Why this proposal is stale, in words (empty when it is not)."""
        reason = self.stale_reason or {}
        if not reason:
            return ""
        label = PRECONDITION_LABELS.get(reason.get("field"), reason.get("field"))
        by = f" by event #{reason['event_sequence']} ({reason.get('event_type')})" if reason.get("event_sequence") else ""
        return (f"The {label} changed from {reason.get('from') or '—'} to {reason.get('to') or '—'}{by} after this "
                f"proposal was made; it assumed {reason.get('from') or '—'}.")

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
    # retried automatically; an operator (or a provider's delivery webhook) settles it.
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


class DayCount(models.TextChoices):
    CALENDAR = "calendar", "Calendar days"
    BUSINESS = "business", "Business days"


class DeadlinePolicy(models.Model):
    """A tenant's deadline rules, versioned: a change is a new row with the next version (rows are
    never edited), so each case names the version its due dates were computed under. Defaults
    follow CFPB practice: the company responds within 15 days, the final response within 60."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    version = models.PositiveIntegerField()
    country = models.CharField(max_length=2, default="US", help_text="ISO country code for public holidays.")
    subdivision = models.CharField(max_length=10, blank=True, help_text="State/province code, e.g. CA (optional).")
    acknowledge_days = models.PositiveIntegerField(default=15)
    acknowledge_day_count = models.CharField(max_length=10, choices=DayCount.choices, default=DayCount.CALENDAR)
    response_days = models.PositiveIntegerField(default=15)
    response_day_count = models.CharField(max_length=10, choices=DayCount.choices, default=DayCount.CALENDAR)
    close_days = models.PositiveIntegerField(default=60)
    close_day_count = models.CharField(max_length=10, choices=DayCount.choices, default=DayCount.CALENDAR)
    due_soon_days = models.PositiveIntegerField(default=3, help_text="A due date this close is 'due soon'.")
    pause_while_waiting_for_evidence = models.BooleanField(
        default=False, help_text="Stop the clock while the case waits for evidence; due dates move on by the pause.")
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant_id", "-version"]
        verbose_name_plural = "deadline policies"
        constraints = [models.UniqueConstraint(fields=["tenant", "version"], name="deadline_policy_version_unique")]

    def __str__(self) -> str:
        return f"deadline policy v{self.version} ({self.tenant_id})"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValueError("Deadline policies are versioned: create a new version instead of editing one.")
        super().save(*args, **kwargs)


class DeadlineCrossing(models.Model):
    """A due date crossing into 'due soon' or 'overdue', recorded once (the unique constraint is
    what makes the beat task idempotent). A moved due date is a new crossing."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="deadline_crossings")
    deadline = models.CharField(max_length=20)  # acknowledge / response / close
    state = models.CharField(max_length=20)  # due_soon / overdue
    due = models.DateField()
    event = models.ForeignKey(CaseEvent, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["case", "deadline", "state", "due"],
                                               name="deadline_crossing_once")]

    def __str__(self) -> str:
        return f"{self.case_id} {self.deadline} {self.state} {self.due}"


class CaseWords(models.Model):
    """The words of one case for the case search: its reference, title, company and product and its
    complaint narrative, as one tsvector. PostgreSQL only: database triggers keep it (created by web
    migrations 0003 and 0004, where the table got its name; never written from Python), and its GIN
    index finds the cases that have every word in one lookup. The tsvector is stored out of line
    (TOAST), so the rows the lookup visits are small. On SQLite the table stays empty and the search
    matches substrings instead."""

    case = models.OneToOneField("cases.Case", on_delete=models.DO_NOTHING, primary_key=True, db_constraint=False,
                                related_name="+")
    tenant_id = models.BigIntegerField()
    words = SearchVectorField()

    class Meta:
        db_table = "web_casewords"
        default_permissions = ()

    def __str__(self) -> str:
        return f"words of case {self.case_id}"
