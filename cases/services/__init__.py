"""The only write path for domain state (docs/architecture.md, "Write paths").

Every function is keyword-only, takes an `actor` (an Actor, or a user for convenience), checks
policy and permission, locks what it changes in a fixed order (case, then proposal/notice), writes
a CaseEvent and an AuditEvent in the same transaction, and raises a core.errors.DomainError —
changing nothing — when it refuses.

The functions live in modules by sub-domain; this package re-exports the public ones so callers
keep writing `from cases import services` / `services.proposal_approve(...)`.
"""

from cases.services.case import case_create, case_take, case_transition, evidence_add
from cases.services.deadlines import case_deadline_extend, case_deadlines_recompute, deadline_policy_create
from cases.services.dispatch import notice_dispatch, notice_dispatch_request, notice_settle
from cases.services.notices import (
    notice_approve,
    notice_draft,
    notice_edit,
    notice_reject,
    notice_submit,
    notice_withdraw,
)
from cases.services.proposals import proposal_approve, proposal_create, proposal_reject, proposal_withdraw

__all__ = [
    "case_create", "case_take", "case_transition", "evidence_add",
    "case_deadline_extend", "case_deadlines_recompute", "deadline_policy_create",
    "notice_approve", "notice_dispatch", "notice_dispatch_request", "notice_draft", "notice_edit",
    "notice_reject", "notice_settle", "notice_submit", "notice_withdraw",
    "proposal_approve", "proposal_create", "proposal_reject", "proposal_withdraw",
]
