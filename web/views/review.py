"""The review inbox: what waits for a person's decision in this tenant."""

from __future__ import annotations

from django.shortcuts import render

from cases import policy, selectors
from core.actors import Actor
from web.access import member_required
from web.actors import actor_labels
from web.case_page import proposal_payload_label


@member_required
def review_inbox(request):
    user = request.user
    inbox = selectors.review_inbox_for_user(user=user)
    proposals = list(inbox["proposals"].select_related("proposed_by_user"))
    notices = list(inbox["notices"])
    me = Actor.for_user(user).identifier
    may_approve_proposals = user.role in policy.CAN_APPROVE_PROPOSALS
    may_approve_notices = user.role in policy.CAN_APPROVE_NOTICES
    identifiers = {p.proposer_id for p in proposals} | {p.requested_by for p in proposals} \
        | {n.drafted_by for n in notices} | {n.requested_by for n in notices} \
        | {n.last_edited_by for n in notices} | {n.submitted_by for n in notices} \
        | {f"user:{p.payload['assignee_id']}" for p in proposals if (p.payload or {}).get("assignee_id")}
    labels = actor_labels(tenant_id=user.tenant_id, identifiers=identifiers)
    usernames = {int(i.split(":")[1]): label for i, label in labels.items() if i.startswith("user:")}
    for proposal in proposals:
        proposal.is_stale_now = proposal.is_stale  # i7: staleness by precondition (ADR 0006)
        proposal.payload_label = proposal_payload_label(proposal, usernames)
        proposal.is_own = me in {proposal.proposer_id, proposal.requested_by}
        proposal.may_decide = may_approve_proposals and not proposal.is_own and not proposal.is_stale_now
    selectors.deadline_rows_for_inbox(user=user, items=[*proposals, *notices])  # i7: due dates (issue 7)
    for notice in notices:
        notice.is_own = me in {notice.drafted_by, notice.last_edited_by, notice.requested_by}
        notice.may_decide = may_approve_notices and not notice.is_own
    return render(request, "web/review/inbox.html", {
        "proposals": proposals, "notices": notices, "labels": labels,
        "may_approve_proposals": may_approve_proposals, "may_approve_notices": may_approve_notices,
    })
