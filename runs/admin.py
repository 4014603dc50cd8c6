"""Operations views for runs. Every row is read-only here; runs change only through the actions,
which call runs.services (cancel, resume, fork) with the logged-in person as the actor, so the
same checks and audit apply as everywhere. Tenant scoping follows cases.admin."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from cases.admin import ReadOnlyAdmin, ReasonActionForm
from cases.admin_actions import run_service_action
from core.actors import Actor
from runs import services
from runs.models import AgentRun, Artifact, Checkpoint, Finding, MemoryRecord, ModelCall, Step, ToolCall
from runs.selectors import run_queue_position


def _actor(request):
    """Superusers without a tenant act as the system (named after them), so the audit says who."""
    user = request.user
    return user if user.tenant_id else Actor.system(f"admin-{user.username}")


class RunActionForm(ReasonActionForm):
    from_step = forms.IntegerField(required=False, min_value=0, label="Fork from step",
                                   widget=forms.NumberInput(attrs={"style": "width: 5em"}))


class StepInline(admin.TabularInline):
    model = Step
    fields = ("sequence", "node", "attempt", "status", "outcome", "next_node", "tokens", "duration_ms", "error",
              "copied_from")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("sequence",)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return True  # only inside a run page the parent admin already scoped


@admin.register(AgentRun)
class AgentRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "graph", "case", "tenant", "status", "phase", "current_node", "steps_used", "tokens_used",
                    "queue_position", "lease_owner", "parent_run", "created_at")
    list_filter = ("status", "graph", "phase", "tenant")
    search_fields = ("id", "case__reference", "started_by", "error")
    list_select_related = ("case", "tenant", "parent_run")
    inlines = (StepInline,)
    action_form = RunActionForm
    actions = ["cancel_runs", "resume_runs", "fork_runs"]

    @admin.display(description="Queue")
    def queue_position(self, run):
        return run_queue_position(run=run) or "—"

    @admin.action(description="Cancel (stops at the next step boundary)")
    def cancel_runs(self, request, queryset):
        run_service_action(self, request, queryset, verb="Cancelled or asked to stop",
                           call=lambda run, reason: services.run_cancel(actor=_actor(request), run=run, reason=reason))

    @admin.action(description="Resume from the last checkpoint")
    def resume_runs(self, request, queryset):
        run_service_action(self, request, queryset, verb="Resumed",
                           call=lambda run, reason: services.run_resume(actor=_actor(request), run=run))

    @admin.action(description="Fork from the checkpoint after step N (give N)")
    def fork_runs(self, request, queryset):
        raw = (request.POST.get("from_step") or "").strip()
        if not raw.isdigit():
            self.message_user(request, "Give the step to fork from (0 = the start) in 'Fork from step'.",
                              messages.ERROR)
            return
        run_service_action(self, request, queryset, verb=f"Forked after step {raw}",
                           call=lambda run, reason: services.run_fork(actor=_actor(request), run=run,
                                                                      from_sequence=int(raw)))


class RunChildAdmin(ReadOnlyAdmin):
    tenant_lookup = "run__tenant"
    related_filters = ()


@admin.register(Checkpoint)
class CheckpointAdmin(RunChildAdmin):
    list_display = ("id", "run", "sequence", "schema_version", "state_hash", "size_bytes", "created_at")
    search_fields = ("run__id",)


@admin.register(ModelCall)
class ModelCallAdmin(RunChildAdmin):
    list_display = ("id", "run", "sequence", "attempt", "agent", "provider", "model", "prompt_tokens",
                    "completion_tokens", "latency_ms", "error")
    list_filter = ("agent", "provider")
    search_fields = ("run__id",)


@admin.register(ToolCall)
class ToolCallAdmin(RunChildAdmin):
    list_display = ("idempotency_key", "tool", "effect_type", "policy_decision", "status", "reconciled",
                    "external_ref", "started_at")
    list_filter = ("tool", "effect_type", "status", "policy_decision")
    search_fields = ("idempotency_key", "external_ref")


@admin.register(Artifact)
class ArtifactAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "case", "run", "produced_by", "content_hash", "created_at")
    list_filter = ("kind", "tenant")
    search_fields = ("case__reference", "run__id")


@admin.register(Finding)
class FindingAdmin(ReadOnlyAdmin):
    list_display = ("id", "agent", "type", "case", "run", "confidence", "contradicts", "created_at")
    list_filter = ("agent", "type", "tenant")
    search_fields = ("summary", "case__reference")


@admin.register(MemoryRecord)
class MemoryRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "subject", "type", "status", "short_content", "expires_at", "proposed_by", "decided_by")
    list_filter = ("status", "type", "tenant")
    search_fields = ("subject", "content")
    actions = ["confirm_memories", "forget_memories"]
    action_form = ReasonActionForm

    @admin.display(description="Content")
    def short_content(self, memory):
        return memory.content[:80]

    @admin.action(description="Confirm (make active)")
    def confirm_memories(self, request, queryset):
        run_service_action(self, request, queryset, verb="Confirmed",
                           call=lambda memory, note: services.memory_confirm(actor=_actor(request), memory=memory,
                                                                             note=note))

    @admin.action(description="Reject / forget")
    def forget_memories(self, request, queryset):
        run_service_action(self, request, queryset, verb="Forgotten",
                           call=lambda memory, reason: services.memory_forget(actor=_actor(request), memory=memory,
                                                                              reason=reason))
