"""A person's notifications, read from what the records already say (no second copy to keep in
step): runs they started that ended, decisions on proposals they made or asked an agent for, and
decisions on notices they drafted — newest first, each linking to the exact object. What happened
after their read mark (web.models.NotificationsRead) is unread."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.urls import reverse

from cases import selectors
from cases.models import Approval, ProposalStatus
from conversations.models import Message, MessageRole
from core.actors import Actor
from runs import selectors as run_selectors
from runs.models import RunStatus
from web.models import NotificationsRead

ENDED = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.WAITING)
RUN_WORDS = {RunStatus.COMPLETED: "finished", RunStatus.FAILED: "failed", RunStatus.CANCELLED: "was cancelled",
             RunStatus.WAITING: "is waiting for a person"}


@dataclass(frozen=True)
class Notification:
    at: datetime
    text: str
    url: str
    is_unread: bool = False


def read_until(user) -> datetime | None:
    return NotificationsRead.objects.filter(user=user).values_list("read_until", flat=True).first()


def chat_reply_urls(*, user, runs) -> dict[int, str]:
    """For each chat run of `runs` that replied: the URL of its reply in its thread (one query, none
    when no run is a chat run)."""
    chat_runs = [run for run in runs if run.thread_id]
    if not chat_runs:
        return {}
    replies = Message.objects.filter(tenant_id=user.tenant_id, thread_id__in={r.thread_id for r in chat_runs},
                                     run_id__in=[str(r.pk) for r in chat_runs], role=MessageRole.ASSISTANT) \
        .values_list("run_id", "thread_id", "sequence")
    return {int(run_id): reverse("web:thread_detail", args=[thread_id]) + f"#message-{sequence}"
            for run_id, thread_id, sequence in replies}


def _run_notifications(*, user, runs) -> list[Notification]:
    """A run that ended links to the run; a chat run that replied links to its reply in the thread."""
    replies = chat_reply_urls(user=user, runs=runs)
    found = []
    for run in runs:
        if run.pk in replies:
            found.append(Notification(at=run.updated_at, url=replies[run.pk],
                                      text=f"The assistant replied in the thread “{run.thread.title}”."))
            continue
        where = f" of {run.case.reference}" if run.case else ""
        found.append(Notification(at=run.updated_at, url=reverse("web:run_detail", args=[run.pk]),
                                  text=f"Your run R{run.pk}{where} {RUN_WORDS.get(run.status, run.status)}."))
    return found


def notifications_for_user(*, user, limit: int = 30) -> list[Notification]:
    """The newest `limit` notifications of `user` (three queries, each capped at `limit`)."""
    me = Actor.for_user(user).identifier
    found: list[Notification] = []
    runs = list(run_selectors.run_list_for_user(user=user).filter(started_by_user=user, status__in=ENDED)
                .select_related("thread").order_by("-updated_at")[:limit])
    found += _run_notifications(user=user, runs=runs)
    proposals = selectors.proposal_list_for_user(user=user).filter(
        Q(proposer_id=me) | Q(requested_by=me), decided_at__isnull=False,
        status__in=[ProposalStatus.APPLIED, ProposalStatus.REJECTED]).order_by("-decided_at")[:limit]
    for proposal in proposals:
        verb = "approved and applied" if proposal.status == ProposalStatus.APPLIED else "rejected"
        url = reverse("web:case_detail", args=[proposal.case.reference]) + f"#proposal-{proposal.pk}"
        found.append(Notification(at=proposal.decided_at, url=url,
                                  text=f"Proposal P{proposal.pk} ({proposal.summary}) on {proposal.case.reference} "
                                       f"was {verb}."))
    notices = selectors.notice_list_for_user(user=user).filter(drafted_by=me).values_list("pk", flat=True)
    for approval in Approval.objects.filter(tenant_id=user.tenant_id, notice_id__in=notices) \
            .select_related("notice__case", "approver").order_by("-created_at")[:limit]:
        notice = approval.notice
        url = reverse("web:case_detail", args=[notice.case.reference]) + f"#notice-{notice.pk}"
        found.append(Notification(at=approval.created_at, url=url,
                                  text=f"Your notice “{notice.subject}” on {notice.case.reference} was "
                                       f"{approval.decision} by {approval.approver.username}."))
    found.sort(key=lambda n: n.at, reverse=True)
    mark = read_until(user)
    return [Notification(at=n.at, text=n.text, url=n.url, is_unread=mark is None or n.at > mark)
            for n in found[:limit]]
