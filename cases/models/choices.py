"""The lifecycle of cases and of what is proposed and sent about them, in one place: every status,
kind and level as TextChoices, and the sets and ranks derived from them. A new state is added to its
enum (in its place in the order) and to the model's transitions; nothing else lists the states."""

from __future__ import annotations

from django.db import models


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


class EvidenceKind(models.TextChoices):
    TEXT = "text", "Text"
    FILE = "file", "File"


class ExtractionStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    READABLE = "readable", "Readable"
    UNREADABLE = "unreadable", "Not readable by the agents"


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


class ApprovalDecision(models.TextChoices):
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class DispatchStatus(models.TextChoices):
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown"


class DayCount(models.TextChoices):
    CALENDAR = "calendar", "Calendar days"
    BUSINESS = "business", "Business days"
