"""The policy layer: who may do what, and the rules agents and services check against.

POLICY_VERSION is recorded on every case event, audit event, proposal and approval, so a
decision can always be traced to the rules in force when it was made. Bump it whenever a rule
here changes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

POLICY_VERSION = "2026.11.2"

ANALYST = "analyst"
SUPERVISOR = "supervisor"
AUDITOR = "auditor"
ADMIN = "admin"

# Case transition name -> roles that may perform it directly (or approve a proposal for it).
TRANSITION_ROLES: dict[str, frozenset[str]] = {
    "triage": frozenset({ANALYST, SUPERVISOR}),
    "start_review": frozenset({ANALYST, SUPERVISOR}),
    "request_evidence": frozenset({ANALYST, SUPERVISOR}),
    "receive_evidence": frozenset({ANALYST, SUPERVISOR}),
    "mark_ready": frozenset({ANALYST, SUPERVISOR}),
    "return_to_review": frozenset({ANALYST, SUPERVISOR}),
    "decide": frozenset({SUPERVISOR}),
    "close": frozenset({SUPERVISOR}),
    "reopen": frozenset({SUPERVISOR}),
}

# Transitions that settle (or unsettle) a case's outcome: decisions, so only a person signed in
# makes them — never an API key's service account, whatever its role. The other transitions move
# work along and stay open to keys of a role that may make them.
PERSON_ONLY_TRANSITIONS = frozenset({"decide", "close", "reopen"})

# Transitions that need a written reason.
TRANSITIONS_REQUIRING_REASON = frozenset({"reopen", "decide", "return_to_review"})

CAN_PROPOSE = frozenset({ANALYST, SUPERVISOR})
CAN_APPROVE_PROPOSALS = frozenset({SUPERVISOR})
CAN_DRAFT_NOTICES = frozenset({ANALYST, SUPERVISOR})
CAN_APPROVE_NOTICES = frozenset({SUPERVISOR})
CAN_DISPATCH_NOTICES = frozenset({ANALYST, SUPERVISOR})
CAN_ADD_EVIDENCE = frozenset({ANALYST, SUPERVISOR})
CAN_CREATE_CASES = frozenset({ANALYST, SUPERVISOR, ADMIN})
CAN_SEE_AUDIT = frozenset({AUDITOR, SUPERVISOR, ADMIN})
# The supervisor's dashboard (reports/, web/views/dashboard.py): the roles that oversee the work read it.
CAN_SEE_DASHBOARD = frozenset({SUPERVISOR, AUDITOR, ADMIN})


def role_may_transition(role: str | None, transition: str) -> bool:
    return role in TRANSITION_ROLES.get(transition, frozenset())


# --- Rules the policy checker applies (CFPB-style complaint handling) -----------------------

@dataclass(frozen=True)
class Rule:
    code: str
    title: str
    description: str
    deadline: timedelta | None = None


RULES: tuple[Rule, ...] = (
    Rule("ACK-15", "Acknowledge within 15 days",
         "The respondent must acknowledge the complaint and send the consumer a response notice "
         "within 15 calendar days of receipt.", timedelta(days=15)),
    Rule("CLOSE-60", "Final response within 60 days",
         "A case must reach a decision within 60 calendar days of receipt.", timedelta(days=60)),
    Rule("SCRA", "Servicemember protections",
         "Complaints from servicemembers or veterans are reviewed at least at medium risk."),
    Rule("OLDER-AM", "Older Americans",
         "Complaints tagged Older American are reviewed at least at medium risk."),
    Rule("FRAUD-ID", "Fraud and identity theft",
         "Allegations of identity theft or fraud are reviewed at high risk and need evidence of the "
         "disputed accounts."),
    Rule("MONEY-LOSS", "Monetary harm",
         "A stated loss above $1,000 raises the risk level by one step."),
)
RULES_BY_CODE = {rule.code: rule for rule in RULES}

# A response notice is due once a case has been triaged and none has been sent or is pending.
NOTICE_DUE_FROM_STATUSES = frozenset({"triaged", "under_review", "waiting_for_evidence", "ready_for_decision"})
