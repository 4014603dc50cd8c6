"""The review inbox: what waits for a person's decision in this tenant, in sections ("to decide",
"approved, not yet sent", "rejected — yours to fix"), filtered, in keyset pages (proposals and
notices each have their own cursor), with each notice's text inline and, for a notice revised in
place (after a rejection, say), diffed against its earlier version — the one a supervisor saw."""

from __future__ import annotations

from django import forms
from django.shortcuts import render
from django.views.decorators.vary import vary_on_headers

from cases import policy, selectors
from cases.models import Approval, ProposalKind, RiskLevel
from core.actors import Actor
from core.errors import Invalid
from web.access import member_required
from web.actors import actor_labels
from web.case_page import proposal_payload_label, rationale_parts
from web.diff import has_changes, word_diff
from web.keyset import KeysetPage, keyset_page

ITEMS_PER_PAGE = 20
SECTIONS = [("decide", "To decide"), ("approved", "Approved, not yet sent"), ("rejected", "Rejected — yours to fix")]


class InboxFilterForm(forms.Form):
    section = forms.ChoiceField(required=False, choices=SECTIONS, widget=forms.HiddenInput)
    kind = forms.ChoiceField(label="Kind", required=False,
                             choices=[("", "Everything"), *ProposalKind.choices, ("notice", "Notices")])
    risk_level = forms.ChoiceField(label="Case risk", required=False, choices=[("", "Any risk"), *RiskLevel.choices])
    proposer = forms.ChoiceField(label="From", required=False,
                                 choices=[("", "Agents and people"), ("agent", "Agents"), ("user", "People")])


def _page(qs, request, prefix: str, notes: list[str]) -> KeysetPage:
    try:
        return keyset_page(qs, key="created_at", descending=False, cursor=request.GET.get(f"{prefix}_after"),
                           before=request.GET.get(f"{prefix}_before"), size=ITEMS_PER_PAGE)
    except Invalid as error:
        notes.append(error.message)
        return keyset_page(qs, key="created_at", descending=False, size=ITEMS_PER_PAGE)


def _query_without(request, *keys: str) -> str:
    query = request.GET.copy()
    for key in keys:
        query.pop(key, None)
    return query.urlencode()


@member_required
@vary_on_headers("HX-Request", "HX-Target")
def review_inbox(request):
    user = request.user
    form = InboxFilterForm(request.GET)
    status = 200 if form.is_valid() else 400
    data = form.cleaned_data
    section = data.get("section") or "decide"
    notes: list[str] = []
    inbox = selectors.review_inbox_for_user(user=user, section=section, kind=data.get("kind") or None,
                                            risk_level=data.get("risk_level") or None,
                                            proposer_type=data.get("proposer") or None)
    proposals = _page(inbox["proposals"], request, "p", notes)
    notices = _page(inbox["notices"], request, "n", notes)
    status = 400 if notes else status
    me = Actor.for_user(user).identifier
    may_approve_proposals = user.role in policy.CAN_APPROVE_PROPOSALS
    may_approve_notices = user.role in policy.CAN_APPROVE_NOTICES
    identifiers = {p.proposer_id for p in proposals} | {p.requested_by for p in proposals} \
        | {n.drafted_by for n in notices} | {n.requested_by for n in notices} \
        | {n.last_edited_by for n in notices} | {n.submitted_by for n in notices} \
        | {f"user:{p.payload['assignee_id']}" for p in proposals if (p.payload or {}).get("assignee_id")}
    labels = actor_labels(tenant_id=user.tenant_id, identifiers=identifiers)
    usernames = {int(i.split(":")[1]): label for i, label in labels.items()
                 if i.startswith("user:") and i.split(":")[1].isdigit()}
    for proposal in proposals:
        proposal.is_stale_now = proposal.is_stale  # staleness by precondition (ADR 0006)
        proposal.payload_label = proposal_payload_label(proposal, usernames)
        proposal.rationale_short = rationale_parts(proposal.rationale, by_agent=proposal.proposer_type == "agent")[0]
        proposal.is_own = me in {proposal.proposer_id, proposal.requested_by}
        proposal.may_decide = (section == "decide" and may_approve_proposals and not proposal.is_own
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
        notice.may_decide = section == "decide" and may_approve_notices and not notice.is_own
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
    return render(request, "web/review/inbox.html", {
        "form": form, "section": section, "sections": SECTIONS, "notes": notes,
        "proposals": proposals, "notices": notices, "labels": labels,
        "p_query": _query_without(request, "p_after", "p_before"),
        "n_query": _query_without(request, "n_after", "n_before"),
        "filter_query": _query_without(request, "p_after", "p_before", "n_after", "n_before", "section"),
        "is_filtered": any(data.get(k) for k in ("kind", "risk_level", "proposer")),
        "may_approve_proposals": may_approve_proposals, "may_approve_notices": may_approve_notices,
    }, status=status)
