"""Inbound e-mail in the admin: read-only, with each message's status and, when refused, the
reason. Scoped like the case admin: superusers see every tenant, other staff their own."""

from django.contrib import admin

from cases.admin import TenantScopedAdmin
from intake.models import InboundMessage


@admin.register(InboundMessage)
class InboundMessageAdmin(TenantScopedAdmin):
    list_display = ("received_at", "tenant", "sender", "subject", "status", "reason", "case")
    list_filter = ("status", "tenant", "provider")
    search_fields = ("sender", "subject", "message_key")
    readonly_fields = [field.name for field in InboundMessage._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
