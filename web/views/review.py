"""The review inbox, a workspace: what waits for a person's decision in this tenant, in sections
("to decide", "overdue", "delivery unknown", "approved, not yet sent", "rejected — yours to fix"),
filtered, in keyset pages (proposals and notices each have their own cursor), listed beside a
reading pane with the selected item (web.review_workspace): for a notice revised in place (after a
rejection, say), its text diffed against the earlier version — the one a supervisor saw. The
decisions taken in the pane are in web.views.review_decide."""

from __future__ import annotations

from django import forms
from django.shortcuts import render
from django.views.decorators.vary import vary_on_headers

from cases import policy, selectors
from cases.models import Approval, ProposalKind, RiskLevel
from cases.services.dispatch import CAN_SETTLE_NOTICES
from core.actors import Actor
from core.errors import Invalid
from web.access import member_required
from web.actors import actor_labels
from web.case_page import proposal_payload_label, rationale_parts
from web.diff import has_changes, word_diff
from web.keyset import KeysetPage, keyset_page
from web.review_workspace import build_rows, pane_for, row_after, row_for

ITEMS_PER_PAGE = 20
SECTIONS = [("decide", "To decide"), ("overdue", "Overdue"), ("unknown", "Delivery unknown"),
            ("approved", "Approved, not yet sent"), ("rejected", "Rejected — yours to fix")]
DECIDING_SECTIONS = ("decide", "overdue")


class InboxFilterForm(forms.Form):
    section = forms.ChoiceField(required=False, choices=SECTIONS, widget=forms.HiddenInput)
    kind = forms.ChoiceField(label="Kind", required=False,
                             choices=[("", "Everything"), *ProposalKind.choices, ("notice", "Notices")])
    risk_level = forms.ChoiceField(label="Case risk", required=False, choices=[("", "Any risk"), *RiskLevel.choices])
    proposer = forms.ChoiceField(label="From", required=False,
                                 choices=[("", "Agents and people"), ("agent", "Agents"), ("user", "People")])
    q = forms.CharField(label="Search", required=False, max_length=200)


def _page(qs, params, prefix: str, notes: list[str]) -> KeysetPage:
    try:
        return keyset_page(qs, key="created_at", descending=False, cursor=params.get(f"{prefix}_after"),
                           before=params.get(f"{prefix}_before"), size=ITEMS_PER_PAGE)
    except Invalid as error:
        notes.append(error.message)
        return keyset_page(qs, key="created_at", descending=False, size=ITEMS_PER_PAGE)


def _query_without(params, *keys: str) -> str:
    query = params.copy()
    for key in keys:
        query.pop(key, None)
    return query.urlencode()


@member_required
@vary_on_headers("HX-Request", "HX-Target")
def review_inbox(request):
    """The workspace page; `?item=<key>` selects a row. An htmx request aimed at the reading pane
    (a row chosen with the mouse or j/k) gets the pane only, the rest of the page stays."""
    context, status = workspace_context(request, request.GET, selected=request.GET.get("item"))
    if request.htmx and request.headers.get("HX-Target") == "review-pane":
        return render(request, "web/review/_pane.html", context, status=status)
    return render(request, "web/review/inbox.html", context, status=status)


def workspace_context(request, params, *, selected: str | None) -> tuple[dict, int]:
    """The list (filtered by `params`, a QueryDict) with `selected` shown in the reading pane (the
    first row when `selected` names no row of the list). Returns (context, status): 400 for
    filters or cursors that were not understood (they are ignored, and said so)."""
    user = request.user
    form = InboxFilterForm(params)
    status = 200 if form.is_valid() else 400
    data = form.cleaned_data  # the fields understood; the others are ignored and listed on the page
    section = data.get("section") or "decide"
    notes: list[str] = []
    inbox = selectors.review_inbox_for_user(user=user, section=section, kind=data.get("kind") or None,
                                            risk_level=data.get("risk_level") or None,
                                            proposer_type=data.get("proposer") or None, search=data.get("q") or None)
    proposals = _page(inbox["proposals"], params, "p", notes)
    notices = _page(inbox["notices"], params, "n", notes)
    status = 400 if notes else status
    may_approve_proposals = user.role in policy.CAN_APPROVE_PROPOSALS
    may_approve_notices = user.role in policy.CAN_APPROVE_NOTICES
    labels, usernames = _labels(user, proposals, notices)
    _annotate(user=user, section=section, proposals=proposals, notices=notices, usernames=usernames,
              may_approve_proposals=may_approve_proposals, may_approve_notices=may_approve_notices)
    rows = build_rows(proposals, notices)
    row = row_for(rows, selected) or (rows[0] if rows else None)
    query = _query_without(params, "item")
    context = {
        "form": form, "section": section, "sections": SECTIONS, "notes": notes,
        "proposals": proposals, "notices": notices, "labels": labels, "rows": rows, "selected": row,
        "query": query, "deciding": section in DECIDING_SECTIONS,
        "p_query": _query_without(params, "p_after", "p_before", "item"),
        "n_query": _query_without(params, "n_after", "n_before", "item"),
        "filter_query": _query_without(params, "p_after", "p_before", "n_after", "n_before", "section", "item"),
        "is_filtered": any(data.get(k) for k in ("kind", "risk_level", "proposer", "q")),
        "may_approve_proposals": may_approve_proposals, "may_approve_notices": may_approve_notices,
        "may_settle": user.role in CAN_SETTLE_NOTICES,
    }
    if row is not None:
        keys = [r.key for r in rows]
        index = keys.index(row.key)
        context |= {"next_key": row_after(rows, row.key), "following_key": keys[index + 1] if index + 1 < len(keys) else "",
                    "previous_key": keys[index - 1] if index > 0 else ""}
        context |= pane_for(user=user, row=row, usernames=usernames)
    return context, status


def _labels(user, proposals, notices) -> tuple[dict, dict]:
    identifiers = {p.proposer_id for p in proposals} | {p.requested_by for p in proposals} \
        | {n.drafted_by for n in notices} | {n.requested_by for n in notices} \
        | {n.last_edited_by for n in notices} | {n.submitted_by for n in notices} \
        | {f"user:{p.payload['assignee_id']}" for p in proposals if (p.payload or {}).get("assignee_id")}
    labels = actor_labels(tenant_id=user.tenant_id, identifiers=identifiers)
    usernames = {int(i.split(":")[1]): label for i, label in labels.items()
                 if i.startswith("user:") and i.split(":")[1].isdigit()}
    return labels, usernames


def _annotate(*, user, section: str, proposals, notices, usernames: dict, may_approve_proposals: bool,
              may_approve_notices: bool) -> None:
    me = Actor.for_user(user).identifier
    deciding = section in DECIDING_SECTIONS
    for proposal in proposals:
        proposal.is_stale_now = proposal.is_stale  # staleness by precondition (ADR 0006)
        proposal.payload_label = proposal_payload_label(proposal, usernames)
        proposal.rationale_short = rationale_parts(proposal.rationale, by_agent=proposal.proposer_type == "agent")[0]
        proposal.is_own = me in {proposal.proposer_id, proposal.requested_by}
        proposal.may_decide = (deciding and may_approve_proposals and not proposal.is_own
                               and not proposal.is_stale_now)
    selectors.deadline_rows_for_inbox(user=user, items=[*proposals, *notices])  # due dates
    earlier = selectors.notice_earlier_versions_for(user=user, notices=list(notices))
    # The latest decision note on each notice (why it was rejected, what the approver said), and the
    # decision on each text it had (what became of the earlier version): one query.
    notes_by_notice: dict[int, Approval] = {}
    decision_by_text: dict[tuple[int, str], Approval] = {}
    for approval in Approval.objects.filter(tenant_id=user.tenant_id, notice_id__in=[n.pk for n in notices]) \
            .select_related("approver").order_by("created_at", "id"):
        notes_by_notice[approval.notice_id] = approval
        decision_by_text[(approval.notice_id, approval.content_hash)] = approval
    for notice in notices:
        notice.is_own = me in {notice.drafted_by, notice.last_edited_by, notice.requested_by}
        notice.may_decide = deciding and may_approve_notices and not notice.is_own
        notice.previous = earlier.get(notice.pk)
        notice.diff = notice.diff_has_changes = notice.subject_changed = notice.recipient_changed = None
        notice.previous_decision = None
        if notice.previous and not notice.previous.get("unrecorded"):
            notice.diff = word_diff(notice.previous["body"], notice.body)
            notice.diff_has_changes = has_changes(notice.diff)
            notice.subject_changed = notice.previous["subject"] != notice.subject
            notice.recipient_changed = notice.previous["recipient"] != notice.recipient
            notice.previous_decision = decision_by_text.get((notice.pk, notice.previous["content_hash"]))
        notice.last_decision = notes_by_notice.get(notice.pk)
