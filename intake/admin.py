from django.contrib import admin

from intake.models import InboundMessage


@admin.register(InboundMessage)
class InboundMessageAdmin(admin.ModelAdmin):
    """Inbound e-mail as received: read-only, with its status and, when refused, the reason."""

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
