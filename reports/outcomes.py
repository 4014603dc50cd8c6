"""How the dashboard sorts an agent's outputs by how they ended, in one place: the refresh counts
with these expressions and the lists behind the numbers filter with the same ones."""

from __future__ import annotations

from django.db import models
from django.db.models import Q, Value, When

from cases.models import NoticeStatus, ProposalKind, ProposalStatus

AGENT_PREFIX = "agent:"

PROPOSAL_OUTCOMES = {
    ProposalStatus.APPLIED: "Approved",
    ProposalStatus.REJECTED: "Rejected",
    ProposalStatus.STALE: "Went stale",
    ProposalStatus.WITHDRAWN: "Withdrawn",
    ProposalStatus.PENDING: "Still pending",
}
PROPOSAL_KIND_LABELS = dict(ProposalKind.choices)

# A notice counts as approved once a supervisor approved its current text (and from then on while it
# is sent); "edited before approval" means that text is not the agent's first draft (version > 1).
APPROVED_NOTICE_STATUSES = (NoticeStatus.APPROVED, NoticeStatus.SENDING, NoticeStatus.SENT, NoticeStatus.FAILED,
                            NoticeStatus.UNKNOWN)
NOTICE_OUTCOMES = {
    "approved_as_drafted": "Approved as drafted",
    "approved_after_edit": "Approved after edits",
    "rejected": "Rejected",
    "withdrawn": "Withdrawn",
    "pending": "Not yet decided",
}

# A dispute's resolution is written by the adjudicator in words; its opening says how it ended.
DISPUTE_OUTCOMES = {
    "settled_by_rule": "Settled by a policy rule or the scoring table",
    "left_to_analyst": "Left to an analyst",
    "unresolved": "Left unresolved",
    "both_kept": "Both positions kept, one proposed",
    "other": "Other",
}


def notice_outcome() -> models.Case:
    return models.Case(
        When(Q(status__in=APPROVED_NOTICE_STATUSES, version__gt=1), then=Value("approved_after_edit")),
        When(status__in=APPROVED_NOTICE_STATUSES, then=Value("approved_as_drafted")),
        When(status=NoticeStatus.REJECTED, then=Value("rejected")),
        When(status=NoticeStatus.WITHDRAWN, then=Value("withdrawn")),
        default=Value("pending"), output_field=models.CharField())


def dispute_outcome() -> models.Case:
    return models.Case(
        When(content__resolution__startswith="Raised to", then=Value("settled_by_rule")),
        When(content__resolution__startswith="Unresolved", then=Value("unresolved")),
        When(Q(content__resolution__startswith="Needs an analyst")
             | Q(content__resolution__icontains="an analyst should"), then=Value("left_to_analyst")),
        When(content__resolution__startswith="The adjudicator", then=Value("both_kept")),
        default=Value("other"), output_field=models.CharField())


def agent_label(identifier: str) -> str:
    """`agent:proposer@3` → "Proposer (version 3)"."""
    name, _, version = identifier.removeprefix(AGENT_PREFIX).partition("@")
    label = name.replace("_", " ").capitalize()
    return f"{label} (version {version})" if version else label
