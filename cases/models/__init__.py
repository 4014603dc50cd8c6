"""Domain state: cases, evidence, proposals, notices, approvals, deadlines and the case event log.

Models hold fields, constraints and FSM transitions (in-memory state changes only). Every write
goes through cases.services; nothing else assigns a status (the FSM fields are protected).

One module per part: `choices` (every status, kind and level, and the lifecycle sets derived from
them), `base` (shared model behaviour), `case`, `evidence`, `proposals`, `notices`, `deadlines`.
Import from `cases.models`: its names are the app's models, as Django expects."""

from cases.models.base import ImmutableModel, ThreadSafeRefreshMixin
from cases.models.case import (
    CASE_TRANSITIONS,
    NO_DUE_LAST_ASCENDING,
    NO_DUE_LAST_DESCENDING,
    TRANSITION_LABELS,
    Case,
    CaseEvent,
    CaseQuerySet,
    CaseReferenceCounter,
    CaseWords,
    next_due_expression,
    next_due_sort_key,
)
from cases.models.choices import (
    OPEN_STATUSES,
    PRECONDITION_EVENTS,
    PRECONDITION_LABELS,
    PROPOSAL_PRECONDITION_FIELDS,
    RISK_ORDER,
    SETTLED_STATUSES,
    STATUS_RANK,
    TERMINAL_STATUSES,
    ApprovalDecision,
    CaseStatus,
    DayCount,
    DispatchStatus,
    EvidenceKind,
    ExtractionStatus,
    NoticeStatus,
    ProposalKind,
    ProposalStatus,
    RiskLevel,
    is_settled,
)
from cases.models.deadlines import DeadlineCrossing, DeadlinePolicy
from cases.models.evidence import Evidence, EvidenceExtraction, evidence_upload_path
from cases.models.notices import Approval, Notice, NoticeDispatch, notice_content_hash
from cases.models.proposals import Proposal

__all__ = [
    "CASE_TRANSITIONS", "NO_DUE_LAST_ASCENDING", "NO_DUE_LAST_DESCENDING", "OPEN_STATUSES", "PRECONDITION_EVENTS",
    "PRECONDITION_LABELS", "PROPOSAL_PRECONDITION_FIELDS", "RISK_ORDER", "SETTLED_STATUSES", "STATUS_RANK",
    "TERMINAL_STATUSES", "TRANSITION_LABELS", "Approval", "ApprovalDecision", "Case", "CaseEvent", "CaseQuerySet",
    "CaseReferenceCounter", "CaseStatus", "CaseWords", "DayCount", "DeadlineCrossing", "DeadlinePolicy",
    "DispatchStatus", "Evidence", "EvidenceExtraction", "EvidenceKind", "ExtractionStatus", "ImmutableModel",
    "Notice", "NoticeDispatch", "NoticeStatus", "Proposal", "ProposalKind", "ProposalStatus", "RiskLevel",
    "ThreadSafeRefreshMixin", "evidence_upload_path", "is_settled", "next_due_expression", "next_due_sort_key",
    "notice_content_hash",
]
