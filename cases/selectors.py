"""Reads, always scoped to the user's tenant. Another tenant's object is NotFound (404)."""

from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from cases.models import Case, CaseEvent, Evidence, Notice, NoticeStatus, Proposal, ProposalStatus
from core.errors import NotFound


def _tenant_id(user) -> int | None:
    return getattr(user, "tenant_id", None)


def case_list_for_user(*, user, status: str | None = None, search: str | None = None,
                       risk_level: str | None = None) -> QuerySet[Case]:
    qs = Case.objects.filter(tenant_id=_tenant_id(user)).select_related("assignee")
    if status:
        qs = qs.filter(status=status)
    if risk_level:
        qs = qs.filter(risk_level=risk_level)
    if search:
        qs = qs.filter(Q(reference__icontains=search) | Q(title__icontains=search) | Q(company__icontains=search)
                       | Q(product__icontains=search))
    return qs.annotate(pending_proposals=Count("proposals", filter=Q(proposals__status=ProposalStatus.PENDING)))


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


def review_inbox_for_user(*, user) -> dict:
    """What waits for a person's decision: pending proposals and notices pending approval, each
    annotated `case_notice_sent` (whether its case's notice was sent: what meets the
    acknowledgement and response deadlines, issue 7) so their due dates need no query per row."""
    case_notice_sent = Exists(Notice.objects.filter(case=OuterRef("case_id"), status=NoticeStatus.SENT))
    return {
        "proposals": proposal_list_for_user(user=user, status=ProposalStatus.PENDING)
        .annotate(case_notice_sent=case_notice_sent).order_by("created_at"),
        "notices": notice_list_for_user(user=user, status=NoticeStatus.PENDING_APPROVAL)
        .annotate(case_notice_sent=case_notice_sent).order_by("created_at"),
    }


def deadline_rows_for_inbox(*, user, items) -> None:
    """Attach `deadlines` (cases.deadlines.DeadlineState list) to each inbox item (proposal or
    notice annotated by review_inbox_for_user), with one query for the tenant's due-soon window."""
    from cases.deadlines import current_policy_due_soon_days

    soon = current_policy_due_soon_days(_tenant_id(user))
    for item in items:
        item.case.notice_sent = getattr(item, "case_notice_sent", None)
        item.deadlines = [d for d in item.case.deadline_states(due_soon_days=soon) if d.due]


def case_events_for_user(*, user, case: Case) -> QuerySet[CaseEvent]:
    return CaseEvent.objects.filter(tenant_id=_tenant_id(user), case=case).order_by("sequence")
