"""Reads, always scoped to the user's tenant. Another tenant's object is NotFound (404)."""

from __future__ import annotations

from datetime import date

from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import Case as DjangoCase
from django.db.models import (
    Count,
    DateField,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from cases import deadlines, policy
from cases.models import (
    STATUS_RANK,
    Case,
    CaseEvent,
    CaseWords,
    Evidence,
    Notice,
    NoticeStatus,
    Proposal,
    ProposalStatus,
    next_due_sort_key,
)
from core.errors import NotFound


def _tenant_id(user) -> int | None:
    return getattr(user, "tenant_id", None)


# --- the case queue: search, filters, quick views, sorts --------------------------------

NARRATIVE_TITLE = "Complaint narrative"  # the evidence case_create makes of the narrative
SEARCH_CONFIG = "simple"  # words as written (lower-cased): no stemming, no stop words, like the SQLite match
SEARCH_MAX_WORDS = 8
SEARCH_ID_LIMIT = 2000

RISK_RANK = {"unassessed": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}


def _rank(field: str, ranks: dict[str, int]) -> DjangoCase:
    return DjangoCase(*[When(**{field: value}, then=Value(rank)) for value, rank in ranks.items()],
                      default=Value(0), output_field=IntegerField())


# Sort keys the queue offers: name -> (expression for a direction, descending by default). Each is
# non-null, so a keyset cursor can compare it; the PostgreSQL indexes (tenant, key, id) are in
# web/migrations, the due date's in Case.Meta.
CASE_SORTS = {
    "created": (lambda descending: F("created_at"), True),
    "updated": (lambda descending: F("updated_at"), True),
    "received": (lambda descending: Coalesce("received_at", Value(date(1, 1, 1)), output_field=DateField()), True),
    "risk": (lambda descending: _rank("risk_level", RISK_RANK), True),
    "status": (lambda descending: _rank("status", STATUS_RANK), False),
    # The stored next_due (the earliest due date still open), soonest first; cases with none
    # come last in either direction.
    "due": (lambda descending: next_due_sort_key(descending=descending), False),
}

QUICK_VIEWS = ("mine", "decide", "overdue", "unassigned")


def _search_filter(qs: QuerySet[Case], *, tenant_id, search: str) -> QuerySet[Case]:
    """Every word must match the reference, title, company, product, consumer (name or email) or
    narrative (each word may match a different one). PostgreSQL: one GIN lookup in the per-case words the
    database triggers keep (CaseWords); elsewhere a case-insensitive substring match per word."""
    words = search.split()[:SEARCH_MAX_WORDS]
    if connection.vendor == "postgresql":
        query = SearchQuery(" ".join(words), config=SEARCH_CONFIG, search_type="plain")
        matching = CaseWords.objects.filter(tenant_id=tenant_id, words=query).values_list("case_id", flat=True)
        # One bounded read first (the planner serves a LIMIT well either way: the GIN index for rare
        # words, an early-stopping scan for common ones). Up to SEARCH_ID_LIMIT matches, the page is
        # read by id; past it the words are common, and walking the cases in order while probing
        # each one's words stops after a page (a join the planner picks, and fast exactly then).
        ids = list(matching.order_by()[:SEARCH_ID_LIMIT + 1])
        if len(ids) <= SEARCH_ID_LIMIT:
            return qs.filter(pk__in=ids)
        return qs.filter(pk__in=matching)
    narratives = Evidence.objects.filter(tenant_id=tenant_id, title=NARRATIVE_TITLE)
    for word in words:
        told = narratives.filter(text__icontains=word).order_by().values("case_id")
        qs = qs.filter(Q(reference__icontains=word) | Q(title__icontains=word) | Q(company__icontains=word)
                       | Q(product__icontains=word) | Q(complainant_name__icontains=word)
                       | Q(complainant_email__icontains=word) | Q(pk__in=told))
    return qs


def _pending_work() -> Q:
    """A proposal waiting for a decision, or a notice waiting for approval or to be sent."""
    return Q(Exists(Proposal.objects.filter(case=OuterRef("pk"), status=ProposalStatus.PENDING))) | Q(
        Exists(Notice.objects.filter(case=OuterRef("pk"), status__in=NoticeStatus.in_flight())))


def _needs_decision_of(user) -> Q:
    """Cases with a proposal or notice this person may decide: their role approves it and they did
    not make or ask for it (four eyes). Nothing for roles that do not approve."""
    me = f"user:{user.pk}"
    condition = Q(pk__in=[])
    if getattr(user, "role", None) in policy.CAN_APPROVE_PROPOSALS:
        condition |= Q(Exists(Proposal.objects.filter(case=OuterRef("pk"), status=ProposalStatus.PENDING)
                              .exclude(proposer_id=me).exclude(requested_by=me)))
    if getattr(user, "role", None) in policy.CAN_APPROVE_NOTICES:
        condition |= Q(Exists(Notice.objects.filter(case=OuterRef("pk"), status=NoticeStatus.PENDING_APPROVAL)
                              .exclude(drafted_by=me).exclude(last_edited_by=me).exclude(requested_by=me)))
    return condition


def case_list_for_user(*, user, status: str | None = None, search: str | None = None,
                       risk_level: str | None = None, product: str | None = None, company: str | None = None,
                       assignee_id: int | None = None, tag: str | None = None, has_pending_work: bool = False,
                       view: str | None = None, sort: str | None = None,
                       descending: bool | None = None) -> QuerySet[Case]:
    """The tenant's cases, filtered. Every case carries `pending_proposals` (a per-row count, so only
    the rows fetched pay for it). `view` is a quick view (QUICK_VIEWS); `sort` a CASE_SORTS name,
    which annotates `sort_key` for that direction (`descending`, else the sort's default; ordering is
    the caller's: keyset pages order by it and the id)."""
    tenant_id = _tenant_id(user)
    qs = Case.objects.filter(tenant_id=tenant_id).select_related("assignee")
    if status:
        qs = qs.filter(status=status)
    if risk_level:
        qs = qs.filter(risk_level=risk_level)
    if product:
        qs = qs.filter(product__iexact=product.strip())
    if company:
        qs = qs.filter(company__iexact=company.strip())
    if assignee_id is not None:
        qs = qs.filter(assignee_id=assignee_id)
    if tag:
        qs = qs.filter(tags__icontains=tag.strip())
    if has_pending_work:
        qs = qs.filter(_pending_work())
    if view == "mine":
        qs = qs.filter(assignee_id=getattr(user, "pk", None))
    elif view == "overdue":
        # On the ascending due-date key (no due date = 9999-12-31, never overdue): its index serves it.
        qs = qs.alias(due_key=next_due_sort_key(descending=False)).filter(due_key__lt=timezone.localdate())
    elif view == "unassigned":
        qs = qs.filter(assignee__isnull=True).exclude(status="closed")
    elif view == "decide":
        qs = qs.filter(_needs_decision_of(user))
    if search and search.strip():
        qs = _search_filter(qs, tenant_id=tenant_id, search=search)
    if sort:
        expression, descending_default = CASE_SORTS[sort]
        qs = qs.annotate(sort_key=expression(descending_default if descending is None else descending))
    pending = (Proposal.objects.filter(case=OuterRef("pk"), status=ProposalStatus.PENDING).order_by()
               .values("case").annotate(n=Count("pk")).values("n"))
    return qs.annotate(pending_proposals=Coalesce(Subquery(pending, output_field=IntegerField()), 0))


def case_get_for_user(*, user, reference: str | None = None, pk: int | None = None) -> Case:
    qs = Case.objects.filter(tenant_id=_tenant_id(user)).select_related("assignee", "tenant")
    try:
        if reference is not None:
            return qs.get(reference=reference)
        return qs.get(pk=pk)
    except (Case.DoesNotExist, ValueError):
        raise NotFound("No such case.") from None


def evidence_list_for_case(*, user, case: Case) -> QuerySet[Evidence]:
    return Evidence.objects.filter(tenant_id=_tenant_id(user), case=case)


def evidence_get_for_user(*, user, pk: int) -> Evidence:
    try:
        return Evidence.objects.select_related("case").get(tenant_id=_tenant_id(user), pk=pk)
    except (Evidence.DoesNotExist, ValueError):
        raise NotFound("No such evidence.") from None


def proposal_list_for_user(*, user, status: str | None = None, case: Case | None = None) -> QuerySet[Proposal]:
    qs = Proposal.objects.filter(tenant_id=_tenant_id(user)).select_related("case", "decided_by")
    if status:
        qs = qs.filter(status=status)
    if case is not None:
        qs = qs.filter(case=case)
    return qs


def proposal_get_for_user(*, user, pk: int) -> Proposal:
    try:
        return Proposal.objects.select_related("case").get(tenant_id=_tenant_id(user), pk=pk)
    except (Proposal.DoesNotExist, ValueError):
        raise NotFound("No such proposal.") from None


def notice_list_for_user(*, user, status: str | None = None, case: Case | None = None) -> QuerySet[Notice]:
    qs = Notice.objects.filter(tenant_id=_tenant_id(user)).select_related("case")
    if status:
        qs = qs.filter(status=status)
    if case is not None:
        qs = qs.filter(case=case)
    return qs


def notice_get_for_user(*, user, pk: int) -> Notice:
    try:
        return Notice.objects.select_related("case").get(tenant_id=_tenant_id(user), pk=pk)
    except (Notice.DoesNotExist, ValueError):
        raise NotFound("No such notice.") from None


INBOX_SECTIONS = ("decide", "approved", "rejected")


def review_inbox_for_user(*, user, section: str = "decide", kind: str | None = None,
                          risk_level: str | None = None, proposer_type: str | None = None,
                          search: str | None = None) -> dict:
    """The review inbox, by section (oldest first; callers page them):

    - "decide": pending proposals and notices pending approval (what waits for a decision);
    - "approved": notices approved (or failed to send) and not yet sent;
    - "rejected": proposals and notices rejected that this person made, drafted or asked for —
      theirs to fix (a rejected notice can be edited and resubmitted);
    - "overdue": what waits for a decision on a case with a due date before today;
    - "unknown": notices whose delivery nobody recorded (unknown, or sending), to settle.

    `search` keeps items whose case reference, title or company contains it.

    `kind` narrows proposals to one ProposalKind ("notice" keeps only notices, and any proposal
    kind drops notices), `risk_level` to cases at that risk, `proposer_type` to agent or user."""
    me = f"user:{getattr(user, 'pk', '')}"
    proposals = proposal_list_for_user(user=user).select_related("case", "proposed_by_user")
    notices = notice_list_for_user(user=user)
    if section == "approved":
        proposals = proposals.none()
        notices = notices.filter(status__in=[NoticeStatus.APPROVED, NoticeStatus.FAILED])
    elif section == "rejected":
        proposals = proposals.filter(status=ProposalStatus.REJECTED).filter(
            Q(proposer_id=me) | Q(requested_by=me) | Q(proposed_by_user_id=getattr(user, "pk", None)))
        notices = notices.filter(status=NoticeStatus.REJECTED).filter(
            Q(drafted_by=me) | Q(last_edited_by=me) | Q(requested_by=me))
    elif section == "unknown":
        proposals = proposals.none()
        notices = notices.filter(status__in=NoticeStatus.unsettled())
    else:
        proposals = proposals.filter(status=ProposalStatus.PENDING)
        notices = notices.filter(status=NoticeStatus.PENDING_APPROVAL)
        if section == "overdue":
            today = timezone.localdate()
            proposals, notices = proposals.filter(case__next_due__lt=today), notices.filter(case__next_due__lt=today)
    if search and search.strip():
        words = search.strip()
        matches = Q(case__reference__icontains=words) | Q(case__title__icontains=words) \
            | Q(case__company__icontains=words)
        proposals, notices = proposals.filter(matches), notices.filter(matches)
    if kind == "notice":
        proposals = proposals.none()
    elif kind:
        proposals, notices = proposals.filter(kind=kind), notices.none()
    if risk_level:
        proposals, notices = proposals.filter(case__risk_level=risk_level), notices.filter(case__risk_level=risk_level)
    if proposer_type:
        proposals = proposals.filter(proposer_type=proposer_type)
        notices = notices.filter(drafted_by__startswith=f"{proposer_type}:")
    # Whether each item's case has a sent notice (what meets the acknowledgement and response
    # deadlines): their due dates need no query per row (deadline_rows_for_inbox).
    case_notice_sent = Exists(Notice.objects.filter(case=OuterRef("case_id"), status=NoticeStatus.SENT))
    return {"proposals": proposals.annotate(case_notice_sent=case_notice_sent).order_by("created_at", "id"),
            "notices": notices.annotate(case_notice_sent=case_notice_sent).order_by("created_at", "id")}


def notice_earlier_versions_for(*, user, notices: list[Notice]) -> dict[int, dict]:
    """For each notice revised in place (notice_edit), the earlier text of that same notice to diff
    against, in one query for the whole page: the latest earlier version that was submitted for
    approval (the text a supervisor saw — rejected, say), else the version just before this one.
    Each edit event keeps the text it replaced (`payload["replaced"]`); an edit recorded before it
    did gives `{"unrecorded": True}`. A notice never edited (a first version) is not in the result.

    Returns {notice pk: {"version", "recipient", "subject", "body", "content_hash", "was_submitted"}}."""
    by_pk = {n.pk: n for n in notices}
    if not by_pk:
        return {}
    edits: dict[int, list[dict]] = {}
    submitted: dict[int, set[str]] = {}
    events = CaseEvent.objects.filter(tenant_id=_tenant_id(user), case_id__in={n.case_id for n in notices},
                                      event_type__in=["notice.edited", "notice.submitted"]).order_by("sequence")
    for event_type, payload in events.values_list("event_type", "payload"):
        notice_id = (payload or {}).get("notice_id")
        if notice_id not in by_pk:
            continue
        if event_type == "notice.submitted":
            submitted.setdefault(notice_id, set()).add(payload.get("content_hash"))
        else:
            edits.setdefault(notice_id, []).append(payload)
    found: dict[int, dict] = {}
    for notice_id, payloads in edits.items():
        recorded = [p["replaced"] | {"content_hash": p.get("old_hash", "")}
                    for p in payloads if isinstance(p.get("replaced"), dict)]
        if not recorded:
            found[notice_id] = {"unrecorded": True}
            continue
        seen = submitted.get(notice_id, set())
        base = next((r for r in reversed(recorded) if r["content_hash"] in seen), recorded[-1])
        found[notice_id] = base | {"was_submitted": base["content_hash"] in seen}
    return found


def deadline_rows_for_inbox(*, user, items) -> None:
    """Attach `deadlines` (cases.deadlines.DeadlineState list) to each inbox item (proposal or
    notice annotated by review_inbox_for_user), with one query for the tenant's due-soon window."""
    soon = deadlines.current_policy_due_soon_days(_tenant_id(user))
    for item in items:
        item.case.notice_sent = getattr(item, "case_notice_sent", None)
        item.deadlines = [d for d in deadlines.case_deadline_states(item.case, due_soon_days=soon) if d.due]


def case_events_for_user(*, user, case: Case) -> QuerySet[CaseEvent]:
    return CaseEvent.objects.filter(tenant_id=_tenant_id(user), case=case).order_by("sequence")
