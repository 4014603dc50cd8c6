"""The audit timeline, for the tenant and for one case. Auditors, supervisors and admins only."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.shortcuts import render

from audit.selectors import audit_events_for_tenant
from cases import selectors
from web.access import member_required, require_audit_access
from web.actors import actor_labels
from web.forms import AuditFilterForm

EVENTS_PER_PAGE = 50

# Offered in the filter as a starting point; any action prefix can be typed.
ACTION_SUGGESTIONS = (
    "cases.case", "cases.case.created", "cases.case.transitioned", "cases.case.risk_changed", "cases.case.assigned",
    "cases.evidence.added", "cases.proposal", "cases.proposal.created", "cases.proposal.approved",
    "cases.proposal.rejected", "cases.proposal.withdrawn", "cases.proposal.staled", "cases.notice",
    "cases.notice.drafted", "cases.notice.edited", "cases.notice.submitted", "cases.notice.approved",
    "cases.notice.rejected", "cases.notice.withdrawn", "cases.notice.dispatch_started", "cases.notice.sent",
    "cases.notice.dispatch_failed",
)


def _case_id(stream: str) -> int | None:
    kind, _, value = stream.partition(":")
    return int(value) if kind == "case" and value.isdigit() else None


def _timeline(request, *, case=None):
    require_audit_access(request.user)
    form = AuditFilterForm(request.GET)
    action = form.cleaned_data["action"].strip() if form.is_valid() else ""
    events = audit_events_for_tenant(tenant_id=request.user.tenant_id, case_id=case.pk if case else None,
                                     action=action or None)
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    labels = actor_labels(tenant_id=request.user.tenant_id, identifiers={e.actor_id for e in page})
    case_ids = {_case_id(e.stream) for e in page} - {None}
    if case is not None:
        references = {case.pk: case.reference}
    else:  # one query for the page's cases, through the tenant-scoped selector
        references = dict(selectors.case_list_for_user(user=request.user).filter(pk__in=case_ids)
                          .values_list("pk", "reference")) if case_ids else {}
    for event in page:
        event.case_reference = references.get(_case_id(event.stream), "")
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "web/audit/timeline.html", {
        "case": case, "form": form, "page": page, "labels": labels, "query": query.urlencode(),
        "suggestions": ACTION_SUGGESTIONS,
    }, status=200 if form.is_valid() else 400)


@member_required
def audit_timeline(request):
    return _timeline(request)


@member_required
def case_audit(request, reference: str):
    require_audit_access(request.user)  # before revealing whether the case exists
    case = selectors.case_get_for_user(user=request.user, reference=reference)
    return _timeline(request, case=case)
