"""The audit ledger in the Django admin: read-only, always.

Nobody adds, changes or deletes an audit event or a stream head here, superusers included (the
database triggers would refuse anyway). Superusers see every tenant; other staff users see their
own tenant's events, and only if their role may see the audit trail (auditor, supervisor, admin).
One action verifies the hash chains of the selected streams.

Like the rest of the audit app this imports nothing else of ours (it is the lowest layer): the tenant and the
role are read from the user object."""

from __future__ import annotations

from django.contrib import admin, messages

from audit.models import AuditEvent, AuditStreamHead, AuditVerifiedHead
from audit.verify import verify_all


class _AuditAdmin(admin.ModelAdmin):
    def _may_see_audit(self, request) -> bool:
        user = request.user
        if not (user.is_active and user.is_staff):
            return False
        return user.is_superuser or (user.tenant_id is not None and getattr(user, "can_see_audit", False))

    def has_module_permission(self, request):
        return self._may_see_audit(request)

    def has_view_permission(self, request, obj=None):
        if not self._may_see_audit(request):
            return False
        return obj is None or request.user.is_superuser or self.get_queryset(request).filter(pk=obj.pk).exists()

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields]


@admin.register(AuditEvent)
class AuditEventAdmin(_AuditAdmin):
    list_display = ("created_at", "stream", "sequence", "action", "actor_type", "actor_id", "target_type",
                    "target_id", "decision", "run_id", "policy_version")
    list_filter = ("action", "actor_type", "decision", "target_type", "policy_version")
    search_fields = ("stream", "action", "actor_id", "target_id", "run_id")
    ordering = ("-created_at", "-id")

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(tenant_id=request.user.tenant_id)


@admin.register(AuditStreamHead)
class AuditStreamHeadAdmin(_AuditAdmin):
    list_display = ("stream", "last_sequence", "last_hash")
    search_fields = ("stream",)
    actions = ["verify_chains"]

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        # A stream head has no tenant column: a stream belongs to the tenant whose events it chains.
        return qs.filter(stream__in=AuditEvent.objects.filter(tenant_id=request.user.tenant_id).values("stream"))

    @admin.action(description="Verify the hash chains of the selected streams")
    def verify_chains(self, request, queryset):
        checked, breaks = verify_all(list(queryset.values_list("stream", flat=True)))
        for chain_break in breaks:
            where = f"event id={chain_break.event_id}" if chain_break.event_id else "stream head"
            self.message_user(request, f"BROKEN {chain_break.stream} at sequence {chain_break.sequence} ({where}): "
                                       f"{chain_break.reason}", messages.ERROR)
        if not breaks:
            self.message_user(request, f"OK: {checked} audit stream(s) verified.", messages.SUCCESS)


@admin.register(AuditVerifiedHead)
class AuditVerifiedHeadAdmin(_AuditAdmin):
    """Where `audit_verify --since` resumes each stream (written by audit.verify only)."""

    list_display = ("stream", "sequence", "hash", "verified_at")
    search_fields = ("stream",)
    ordering = ("stream",)

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(stream__in=AuditEvent.objects.filter(tenant_id=request.user.tenant_id).values("stream"))
