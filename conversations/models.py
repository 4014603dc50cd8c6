"""Conversation state: what was said in a thread. Never authoritative about the case.

Messages are append-only: a message is never edited or deleted. Hiding a message's content is a
new `MessageRedaction` row; the original stays stored (and its content hash is in the audit log).
Every write goes through conversations.services."""

from __future__ import annotations

from django.conf import settings
from django.db import models

REDACTED_PLACEHOLDER = "[redacted]"


class AppendOnlyError(Exception):
    """Raised when code tries to update or delete an append-only row."""


class Thread(models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey("cases.Case", on_delete=models.PROTECT, null=True, blank=True,
                             related_name="threads")
    title = models.CharField(max_length=300)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # The sequence of the newest message. Allocation locks this row (SELECT ... FOR UPDATE), so two
    # posts at once queue here and get consecutive sequences; unique (thread, sequence) backs it.
    last_sequence = models.PositiveIntegerField(default=0)
    # Per-thread context budget for the thread part of a chat context; null = the setting.
    token_budget = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "case"])]

    def __str__(self) -> str:
        return f"T{self.pk} {self.title[:60]}"

    @property
    def context_token_budget(self) -> int:
        return self.token_budget or settings.CONVERSATIONS_CONTEXT_TOKEN_BUDGET

    @property
    def audit_case_id(self) -> int | None:
        """A thread about a case audits into the case's chain; others into the tenant's."""
        return self.case_id


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    TOOL = "tool", "Tool"
    SYSTEM = "system", "System"


class MessageQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnlyError("Messages are append-only: they cannot be updated. Redact instead.")

    def delete(self):
        raise AppendOnlyError("Messages are append-only: they cannot be deleted. Redact instead.")

    def with_redaction(self) -> MessageQuerySet:
        return self.select_related("redaction")


class Message(models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="messages")
    sequence = models.PositiveIntegerField()
    role = models.CharField(max_length=20, choices=MessageRole.choices)
    author_type = models.CharField(max_length=20)  # user | agent | system (core.actors.Actor.kind)
    author_id = models.CharField(max_length=200)  # Actor.identifier: user:<pk>, agent:<name>@<version>
    author_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="+")
    content = models.TextField()
    content_sha256 = models.CharField(max_length=64)
    metadata = models.JSONField(default=dict, blank=True)
    # The run that produced this message (assistant/tool messages).
    run_id = models.CharField(max_length=64, blank=True)
    # For a user message: the chat run started to answer it (created in the same transaction).
    reply_run_id = models.CharField(max_length=64, blank=True)
    # For an assistant reply: the user message it answers. Unique, so a retried step cannot
    # answer the same message twice.
    in_reply_to = models.OneToOneField("self", on_delete=models.PROTECT, null=True, blank=True,
                                       related_name="reply")
    # The domain facts an assistant answer relied on, as columns so drift checks can compare them
    # with the case in SQL (the full citation is also in metadata["cited"]).
    cited_case_status = models.CharField(max_length=30, blank=True)
    cited_case_version = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["thread_id", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "sequence"], name="message_sequence_unique_per_thread"),
            models.CheckConstraint(condition=models.Q(sequence__gte=1), name="message_sequence_positive"),
        ]
        indexes = [models.Index(fields=["thread", "role", "sequence"])]

    def __str__(self) -> str:
        return f"T{self.thread_id}#{self.sequence} {self.role}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("Messages are append-only: they cannot be updated. Redact instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("Messages are append-only: they cannot be deleted. Redact instead.")

    @property
    def is_redacted(self) -> bool:
        try:
            return self.redaction is not None
        except MessageRedaction.DoesNotExist:
            return False

    @property
    def display_content(self) -> str:
        """What views and model contexts may show: the content, or the placeholder once redacted."""
        return REDACTED_PLACEHOLDER if self.is_redacted else self.content


class MessageRedaction(models.Model):
    """Hides one message's content from views and contexts. The message itself is untouched."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    message = models.OneToOneField(Message, on_delete=models.PROTECT, related_name="redaction")
    reason = models.CharField(max_length=500)
    redacted_by = models.CharField(max_length=200)  # actor identifier
    redacted_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"redaction of {self.message_id}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("A redaction is final: it cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("A redaction is final: it cannot be deleted.")


class ThreadSummary(models.Model):
    """A compaction of a thread's older turns: covers messages from_sequence..to_sequence (a
    summary folds in the previous one, so the latest covers everything up to its to_sequence).
    Produced by a run with its model call recorded; the originals stay stored."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="summaries")
    from_sequence = models.PositiveIntegerField()
    to_sequence = models.PositiveIntegerField()
    content = models.TextField()
    key_facts = models.JSONField(default=list, blank=True)
    token_count = models.PositiveIntegerField()
    run_id = models.CharField(max_length=64)
    model_call_id = models.CharField(max_length=64)
    previous = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["thread_id", "-to_sequence"]
        verbose_name_plural = "thread summaries"
        constraints = [
            # One summary per end point: a retried compaction step finds the first one.
            models.UniqueConstraint(fields=["thread", "to_sequence"], name="thread_summary_end_unique"),
            models.CheckConstraint(condition=models.Q(from_sequence__lte=models.F("to_sequence")),
                                   name="thread_summary_range_ordered"),
        ]

    def __str__(self) -> str:
        return f"T{self.thread_id} summary {self.from_sequence}..{self.to_sequence}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("Thread summaries are immutable; compaction writes a new one.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("Thread summaries are immutable; they cannot be deleted.")
