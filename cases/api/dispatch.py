"""Asking for a notice to be sent, from the browser or the API.

The sending itself happens in the worker: cases.tasks.notice_dispatch_task calls
cases.services.notice_dispatch, which claims the notice under a row lock and sends it exactly
once. Before queueing, this checks what the person can be told at once (their role, the notice's
state, a valid approval of its current text), so a refusal is an immediate 403/409 with nothing
queued rather than a silent no-op in a worker log. The service checks all of it again at send
time and stays the only judge.

Stand-in: cases.services has no `notice_dispatch_request` yet (the checks plus an audited
"dispatch requested" event and the on-commit enqueue). When it exists, both interfaces call it
and this module goes away."""

from __future__ import annotations

from cases import policy
from cases.models import ApprovalDecision, Notice, NoticeStatus
from cases.tasks import notice_dispatch_enqueue
from core.errors import Conflict, Forbidden, NotAllowed


def notice_dispatch_request(*, user, notice: Notice) -> Notice:
    """Check that `user` may have `notice` sent now, then queue its dispatch after the current
    transaction commits. `notice` comes from a tenant-scoped selector. Raises Forbidden, Conflict
    (already sending or sent) or NotAllowed (not approved, approval voided) and queues nothing."""
    if user.role not in policy.CAN_DISPATCH_NOTICES:
        allowed = ", ".join(sorted(policy.CAN_DISPATCH_NOTICES))
        raise Forbidden(f"Your role ({user.role}) cannot send notices; this needs: {allowed}.")
    if notice.status in (NoticeStatus.SENDING, NoticeStatus.SENT):
        raise Conflict(f"This notice is already {notice.get_status_display().lower()}; it is sent only once.")
    if notice.status not in (NoticeStatus.APPROVED, NoticeStatus.FAILED):
        raise NotAllowed(f"Only an approved notice can be sent; this one is {notice.get_status_display().lower()}.")
    has_valid_approval = notice.approvals.filter(decision=ApprovalDecision.APPROVED, voided_at__isnull=True,
                                                 content_hash=notice.content_hash).exists()
    if not has_valid_approval:
        raise NotAllowed("This notice has no valid approval of its current content; submit it for approval.")
    notice_dispatch_enqueue(notice_id=notice.pk, actor_user_id=user.pk)
    return notice
