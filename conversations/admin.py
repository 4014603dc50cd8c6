"""Operations views for conversations. Threads, messages, summaries and redactions are read-only
here and scoped to the staff user's tenant (cases.admin.ReadOnlyAdmin); the two actions — redact,
compact — call conversations.services with the logged-in person as the actor, so role, tenant and
audit are checked and written exactly as everywhere else. A message's content is never shown
here, only what users see (the placeholder once redacted)."""

from __future__ import annotations

from django.contrib import admin

from cases.admin import ReadOnlyAdmin, ReasonActionForm
from cases.admin_actions import run_service_action
from conversations import services
from conversations.models import Message, MessageRedaction, Thread, ThreadSummary


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "tenant", "case", "created_by", "last_sequence", "created_at")
    list_filter = ("tenant",)
    search_fields = ("title", "case__reference")
    actions = ["compact_threads"]

    @admin.action(description="Compact: summarise older turns (through the conversation service)")
    def compact_threads(self, request, queryset):
        run_service_action(self, request, queryset, verb="Compaction started",
                           call=lambda thread, _reason: services.thread_compact(actor=request.user, thread=thread))


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "sequence", "role", "author_id", "shown_content", "is_redacted", "run_id",
                    "created_at")
    list_filter = ("role",)
    search_fields = ("thread__title", "author_id", "run_id")
    fields = ("thread", "sequence", "role", "author_type", "author_id", "shown_content", "is_redacted",
              "metadata", "run_id", "reply_run_id", "in_reply_to", "cited_case_status", "cited_case_version",
              "content_sha256", "created_at")
    action_form = ReasonActionForm
    actions = ["redact_messages"]

    def get_readonly_fields(self, request, obj=None):
        return self.fields  # `content` itself is deliberately not among them

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("redaction", "thread")

    @admin.display(description="content")
    def shown_content(self, obj: Message) -> str:
        return obj.display_content[:300]

    @admin.display(boolean=True, description="redacted")
    def is_redacted(self, obj: Message) -> bool:
        return obj.is_redacted

    @admin.action(description="Redact: hide the content (give the reason in the box; audited)")
    def redact_messages(self, request, queryset):
        run_service_action(self, request, queryset, verb="Redacted",
                           call=lambda message, reason: services.message_redact(actor=request.user, message=message,
                                                                                reason=reason))


@admin.register(ThreadSummary)
class ThreadSummaryAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "from_sequence", "to_sequence", "token_count", "run_id", "model_call_id",
                    "created_at")
    search_fields = ("thread__title", "run_id")


@admin.register(MessageRedaction)
class MessageRedactionAdmin(ReadOnlyAdmin):
    list_display = ("id", "message", "reason", "redacted_by", "redacted_at")
    search_fields = ("reason", "redacted_by")
