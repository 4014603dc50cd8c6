"""Reads, always scoped to the user's tenant. Another tenant's thread is NotFound (404).

Views show `Message.display_content`, never `content`: a redacted message reads "[redacted]"."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from cases.models import Case
from conversations.models import Message, MessageRole, Thread, ThreadSummary
from core.errors import NotFound
from runs.models import AgentRun


def _tenant_id(user) -> int | None:
    return getattr(user, "tenant_id", None)


def thread_list_for_user(*, user, case: Case | None = None) -> QuerySet[Thread]:
    qs = Thread.objects.filter(tenant_id=_tenant_id(user)).select_related("case", "created_by")
    if case is not None:
        qs = qs.filter(case=case)
    return qs


def thread_get_for_user(*, user, pk: int) -> Thread:
    try:
        return Thread.objects.select_related("case", "created_by").get(tenant_id=_tenant_id(user), pk=pk)
    except (Thread.DoesNotExist, ValueError, TypeError):
        raise NotFound("No such thread.") from None


def message_list_for_user(*, user, thread: Thread, after_sequence: int = 0,
                          limit: int | None = None) -> QuerySet[Message]:
    """Messages of a thread in order, redactions joined (use display_content). Originals are
    never hidden from the list: a compacted message is still here, a redacted one shows the
    placeholder."""
    qs = (Message.objects.filter(tenant_id=_tenant_id(user), thread=thread, sequence__gt=after_sequence)
          .select_related("redaction").order_by("sequence"))
    return qs[:limit] if limit else qs


def message_get_for_user(*, user, pk: int) -> Message:
    try:
        return Message.objects.select_related("redaction", "thread").get(tenant_id=_tenant_id(user), pk=pk)
    except (Message.DoesNotExist, ValueError, TypeError):
        raise NotFound("No such message.") from None


def thread_summary_list_for_user(*, user, thread: Thread) -> QuerySet[ThreadSummary]:
    return ThreadSummary.objects.filter(tenant_id=_tenant_id(user), thread=thread).order_by("-to_sequence")


def thread_latest_summary(*, thread: Thread) -> ThreadSummary | None:
    return ThreadSummary.objects.filter(thread=thread).order_by("-to_sequence").first()


@dataclass(frozen=True)
class PendingReply:
    message: Message
    run_id: str
    run_status: str | None  # None when the run row cannot be found

    @property
    def is_waiting(self) -> bool:
        """Still expected to be answered (queued, running or waiting), as opposed to a failed or
        cancelled run whose message will not get an answer without a retry."""
        return self.run_status in {"queued", "running", "waiting"}


def thread_pending_replies(*, thread: Thread, limit: int = 50) -> list[PendingReply]:
    """User messages of the thread that have no assistant reply yet, oldest first, each with the
    status of the chat run started to answer it. Two queries whatever the thread's length."""
    pending = list(Message.objects.filter(thread=thread, role=MessageRole.USER, reply__isnull=True)
                   .select_related("redaction").order_by("sequence")[:limit])
    # Lazy import: runs sits above conversations (docs/adr/0003); this read only maps run ids to
    # their status so the UI can say "reply pending" or "the reply failed".

    run_ids = [m.reply_run_id for m in pending if m.reply_run_id]
    statuses = {str(pk): status for pk, status in AgentRun.objects.filter(pk__in=run_ids)
                .values_list("pk", "status")}
    return [PendingReply(message=m, run_id=m.reply_run_id, run_status=statuses.get(m.reply_run_id))
            for m in pending]
