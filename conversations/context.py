"""The thread part of a chat context (docs/architecture.md, "Models and context"): the latest summary plus the recent turns, within
a token budget.

Cost is bounded independently of the thread's length: one query for the latest summary and one
for at most CONVERSATIONS_CONTEXT_MAX_ROWS (+1) messages after it, newest first, with their
redactions joined in. The whole thread is never loaded. Personal data in the turns and the summary
is replaced by the one redactor (core.redaction) before anything is measured or returned. When the messages after the summary do
not all fit, the context says so (`needs_compaction`) and the caller starts a compaction run.

Budget arithmetic (so the result always fits): the summary gets at most a quarter of the budget;
the last KEEP_RECENT messages always enter, each truncated to its share of the rest if it must
be; older messages after the summary are then added newest-first while they fit."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Q

from conversations.models import REDACTED_PLACEHOLDER, Message, Thread, ThreadSummary
from core.redaction import configured_redactor
from core.tokens import count_tokens, truncate_to_tokens

MESSAGE_OVERHEAD_TOKENS = 4  # role and separators, as chat formats add per message
TRUNCATION_MARK = " [truncated]"


@dataclass(frozen=True)
class ThreadTurn:
    sequence: int
    role: str
    author_id: str
    content: str
    is_redacted: bool
    is_truncated: bool
    tokens: int

    def as_dict(self) -> dict:
        return {"sequence": self.sequence, "role": self.role, "content": self.content}


@dataclass
class ThreadContext:
    thread_id: int
    budget: int
    summary_id: int | None = None
    summary_text: str = ""
    summary_to_sequence: int = 0
    summary_tokens: int = 0
    turns: list[ThreadTurn] = field(default_factory=list)  # oldest first
    tokens: int = 0
    # Messages after the latest summary that did not fit (or were not even read): compaction due.
    needs_compaction: bool = False
    rows_read: int = 0

    def as_dict(self) -> dict:
        """The shape providers read as context["thread"]."""
        return {"summary": self.summary_text, "recent": [turn.as_dict() for turn in self.turns]}

    def source_refs(self) -> dict:
        """What a ModelCall records about the thread part it was given."""
        return {
            "thread_id": self.thread_id,
            "summary_id": self.summary_id,
            "summary_to_sequence": self.summary_to_sequence,
            "message_sequences": [turn.sequence for turn in self.turns],
            "redacted_sequences": [turn.sequence for turn in self.turns if turn.is_redacted],
            "tokens": self.tokens,
            "budget": self.budget,
            "needs_compaction": self.needs_compaction,
        }


def _turn_tokens(content: str) -> int:
    return MESSAGE_OVERHEAD_TOKENS + count_tokens(content)


def _truncate(content: str, limit: int) -> tuple[str, bool]:
    """Fit `content` into `limit` tokens including the per-message overhead and the mark."""
    if _turn_tokens(content) <= limit:
        return content, False
    room = limit - MESSAGE_OVERHEAD_TOKENS - count_tokens(TRUNCATION_MARK)
    return truncate_to_tokens(content, max(room, 0)) + TRUNCATION_MARK, True


def thread_context_build(*, thread: Thread, answering_sequence: int | None = None,
                         budget: int | None = None) -> ThreadContext:
    """Build the thread part of a context for a model call.

    `answering_sequence`: the user message being answered. It is left out (the caller passes it
    as the question), and so are later user messages (posted while this one waited; each is
    answered by its own run) — but replies to earlier messages are kept even though their
    sequence is higher. Without it, the whole thread up to now is the history."""
    budget = budget or thread.context_token_budget
    keep = settings.CONVERSATIONS_KEEP_RECENT
    max_rows = settings.CONVERSATIONS_CONTEXT_MAX_ROWS
    context = ThreadContext(thread_id=thread.pk, budget=budget)
    # Personal data never reaches a model (core.redaction): turns and the summary are redacted
    # here, before they are measured against the budget; build_context redacts the whole again.
    redact = configured_redactor()

    summary = ThreadSummary.objects.filter(thread=thread).order_by("-to_sequence").first()
    if summary is not None:
        text, _ = _truncate(redact(summary.content, names=()), budget // 4)
        context.summary_id = summary.pk
        context.summary_text = text
        context.summary_to_sequence = summary.to_sequence
        context.summary_tokens = _turn_tokens(text)

    after = Message.objects.filter(thread=thread, sequence__gt=context.summary_to_sequence)
    if answering_sequence is not None:
        after = after.filter(
            Q(sequence__lt=answering_sequence)
            | Q(sequence__gt=answering_sequence, in_reply_to__sequence__lt=answering_sequence)
        )
    # +1 row tells whether more messages exist beyond the window without counting them.
    rows = list(after.select_related("redaction").order_by("-sequence")[: max_rows + 1])
    context.rows_read = len(rows)
    if len(rows) > max_rows:
        context.needs_compaction = True
        rows = rows[:max_rows]

    remaining = budget - context.summary_tokens
    per_recent = max(remaining // keep, MESSAGE_OVERHEAD_TOKENS + 8)
    chosen: list[ThreadTurn] = []
    for index, message in enumerate(rows):  # newest first
        redacted = message.is_redacted
        content = REDACTED_PLACEHOLDER if redacted else redact(message.content, names=())
        if index < keep:
            content, truncated = _truncate(content, per_recent)
        else:
            truncated = False
            if _turn_tokens(content) > remaining:
                context.needs_compaction = True
                break
        tokens = _turn_tokens(content)
        remaining -= tokens
        chosen.append(ThreadTurn(sequence=message.sequence, role=message.role, author_id=message.author_id,
                                 content=content, is_redacted=redacted, is_truncated=truncated, tokens=tokens))
    chosen.reverse()
    context.turns = chosen
    context.tokens = context.summary_tokens + sum(turn.tokens for turn in chosen)
    return context
