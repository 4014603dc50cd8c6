"""The case: its fields, guards and FSM transitions, its reference counter, its event log and its
search document."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Coalesce, Least
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from cases import policy
from cases.models.base import ImmutableModel, ThreadSafeRefreshMixin
from cases.models.choices import SETTLED_STATUSES, CaseStatus, NoticeStatus, RiskLevel


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


class CaseQuerySet(models.QuerySet):
    def with_deadlines(self):
        """Annotate `notice_sent` and `computed_next_due`: the rule the stored `Case.next_due` follows
        (next_due_expression), evaluated from the rows it depends on. The two are equal for every
        case written through the services (tests/cases/test_next_due.py); sort on the stored column."""
        notices = self.model._meta.get_field("notices").related_model  # Notice, whose module builds on this one
        notice_sent = models.Exists(notices.objects.filter(case=models.OuterRef("pk"), status=NoticeStatus.SENT))
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
