"""One label scheme for everything a person reads: statuses, kinds, decisions, actions
and actors are shown by these words, never by their stored values ("pending_approval", "user:1").

Templates use the `label` and `actor` filters (web.templatetags.arbiter_ui); views use `label()`.
A value with no entry is turned into words ("waiting_for_evidence" -> "Waiting for evidence"),
so a new status reads acceptably before it gets a label here."""

from __future__ import annotations

from cases.models import CaseStatus, NoticeStatus, ProposalKind, ProposalStatus, RiskLevel
from runs.models import RunPhase, RunStatus

SCHEMES: dict[str, dict[str, str]] = {
    "case_status": dict(CaseStatus.choices),
    "risk": dict(RiskLevel.choices),
    "proposal_status": dict(ProposalStatus.choices) | {"pending": "Waiting for a decision",
                                                       "stale": "Out of date"},
    "proposal_kind": dict(ProposalKind.choices) | {"status_transition": "Status change",
                                                   "risk_level": "Risk level", "assignment": "Assignment"},
    "notice_status": dict(NoticeStatus.choices) | {"pending_approval": "Waiting for approval",
                                                   "failed": "Sending failed (will retry)"},
    "run_status": dict(RunStatus.choices),
    "run_phase": dict(RunPhase.choices),
    "step_outcome": {"goto": "Continued", "end": "Finished", "wait": "Waiting", "failed": "Failed"},
    "decision": {"allowed": "Allowed", "denied": "Denied", "approved": "Approved", "rejected": "Rejected",
                 "stale": "Out of date", "voided": "Voided"},
    "actor_type": {"user": "Person", "agent": "Agent", "system": "System"},
    # The hash chain of an audit stream, as the timeline states it (audit.selectors.ChainStatus).
    "chain_state": {"verified": "Verified up to its latest event", "behind": "Events appended since it was verified",
                    "never": "Never verified", "broken": "Broken"},
    "target_type": {"case": "Case", "proposal": "Proposal", "notice": "Notice", "evidence": "Evidence",
                    "run": "Run", "thread": "Thread", "message": "Message", "memory": "Memory"},
}

# Audit actions in words. Unknown ones become "<Object> <verb>" from their dotted name.
ACTIONS = {
    "cases.case.created": "Case opened",
    "cases.case.transitioned": "Case status changed",
    "cases.case.risk_changed": "Risk level changed",
    "cases.case.assigned": "Case assigned",
    "cases.evidence.added": "Evidence added",
    "cases.proposal.created": "Proposal made",
    "cases.proposal.approved": "Proposal approved",
    "cases.proposal.rejected": "Proposal rejected",
    "cases.proposal.withdrawn": "Proposal withdrawn",
    "cases.proposal.staled": "Proposal out of date",
    "cases.notice.drafted": "Notice drafted",
    "cases.notice.edited": "Notice edited",
    "cases.notice.submitted": "Notice submitted for approval",
    "cases.notice.approved": "Notice approved",
    "cases.notice.rejected": "Notice rejected",
    "cases.notice.withdrawn": "Notice withdrawn",
    "cases.notice.dispatch_started": "Notice sending started",
    "cases.notice.sent": "Notice sent",
    "cases.notice.dispatch_failed": "Notice sending failed",
}


def words(value) -> str:
    text = str(value or "").replace("_", " ").replace(".", " ").strip()
    return text[:1].upper() + text[1:]


def label(value, scheme: str) -> str:
    """The words for `value` in `scheme` (a key of SCHEMES), or the value in words."""
    if value in (None, ""):
        return "—"
    return SCHEMES.get(scheme, {}).get(str(value)) or words(value)


def action_label(action: str) -> str:
    if action in ACTIONS:
        return ACTIONS[action]
    parts = (action or "").split(".")
    return words(" ".join(parts[1:] if len(parts) > 2 else parts)) or "—"


def actor_fallback(identifier: str) -> str:
    """Words for an actor identifier nobody resolved to a name (a person since removed, say)."""
    kind, _, rest = (identifier or "").partition(":")
    if kind == "user":
        return "a former member of staff" if rest else "someone"
    if kind == "agent":
        name, _, version = rest.partition("@")
        return f"{words(name)} agent" + (f" v{version}" if version else "")
    if kind == "system":
        return f"the system ({words(rest).lower()})" if rest else "the system"
    return identifier or "—"
