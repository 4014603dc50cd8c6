"""Operations views for conversations. Messages, summaries and redactions are read-only here;
the actions (redact, compact) call the services, which check role and tenant and audit."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from conversations import services
from conversations.models import Message, MessageRedaction, Thread, ThreadSummary
from core.errors import DomainError


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Thread)
class ThreadAdmin(_ReadOnlyAdmin):
    list_display = ("id", "title", "tenant", "case", "created_by", "last_sequence", "created_at")
    list_filter = ("tenant",)
    search_fields = ("title", "case__reference")
    readonly_fields = ("tenant", "case", "title", "created_by", "created_at", "last_sequence", "token_budget")
    actions = ["compact_threads"]

    @admin.action(description="Compact selected threads (summarise older turns)")
    def compact_threads(self, request, queryset):
        for thread in queryset:
            try:
                run = services.thread_compact(actor=request.user, thread=thread)
            except DomainError as exc:
                self.message_user(request, f"Thread {thread.pk}: {exc.message}", messages.WARNING)
            else:
                self.message_user(request, f"Thread {thread.pk}: compaction run {run.pk} started.")


class RedactForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="Why the content must be hidden. The audit log keeps this reason.")


@admin.register(Message)
class MessageAdmin(_ReadOnlyAdmin):
    list_display = ("id", "thread", "sequence", "role", "author_id", "shown_content", "is_redacted", "run_id",
                    "created_at")
    list_filter = ("role",)
    search_fields = ("thread__title", "author_id", "run_id")
    # `content` is deliberately absent: operations see what users see (the placeholder once redacted).
    fields = ("thread", "sequence", "role", "author_type", "author_id", "shown_content", "metadata", "run_id",
              "reply_run_id", "in_reply_to", "cited_case_status", "cited_case_version", "content_sha256",
              "created_at")
    readonly_fields = fields
    actions = ["redact_messages"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("redaction", "thread")

    @admin.display(description="content")
    def shown_content(self, obj: Message) -> str:
        return obj.display_content[:200]

    @admin.display(boolean=True, description="redacted")
    def is_redacted(self, obj: Message) -> bool:
        return obj.is_redacted

    @admin.action(description="Redact selected messages")
    def redact_messages(self, request, queryset):
        form = RedactForm(request.POST if "reason" in request.POST else None)
        if form.is_bound and form.is_valid():
            done = 0
            for message in queryset:
                try:
                    services.message_redact(actor=request.user, message=message, reason=form.cleaned_data["reason"])
                    done += 1
                except DomainError as exc:
                    self.message_user(request, f"Message {message.pk}: {exc.message}", messages.WARNING)
            self.message_user(request, f"{done} message(s) redacted.")
            return None
        return TemplateResponse(request, "admin/conversations/message/redact.html", {
            **self.admin_site.each_context(request), "title": "Redact messages", "form": form,
            "queryset": queryset, "opts": self.model._meta,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        })


@admin.register(ThreadSummary)
class ThreadSummaryAdmin(_ReadOnlyAdmin):
    list_display = ("id", "thread", "from_sequence", "to_sequence", "token_count", "run_id", "model_call_id",
                    "created_at")
    search_fields = ("thread__title", "run_id")


@admin.register(MessageRedaction)
class MessageRedactionAdmin(_ReadOnlyAdmin):
    list_display = ("id", "message", "reason", "redacted_by", "redacted_at")
    search_fields = ("reason", "redacted_by")
