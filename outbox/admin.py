"""Operations views of the outbox: read-only rows, and one action, "relay now"."""

from django.contrib import admin, messages

from outbox.models import OutboxMessage, WorkerHeartbeat
from outbox.services import outbox_make_due, outbox_relay


class _SuperuserReadOnly(admin.ModelAdmin):
    """Outbox rows and heartbeats belong to no tenant (their kwargs name other tenants' objects):
    superusers only, read-only."""

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(OutboxMessage)
class OutboxMessageAdmin(_SuperuserReadOnly):
    list_display = ("id", "task", "kwargs", "created_at", "available_at", "relayed_at", "attempts", "last_error")
    list_filter = ("task", ("relayed_at", admin.EmptyFieldListFilter))
    search_fields = ("task", "dedupe_key", "last_error")
    readonly_fields = ("task", "kwargs", "dedupe_key", "created_at", "available_at", "relayed_at", "attempts",
                       "last_error")
    actions = ["relay_now"]

    @admin.action(description="Relay now (publish the selected pending rows)")
    def relay_now(self, request, queryset):
        ids = list(queryset.filter(relayed_at__isnull=True).values_list("pk", flat=True))
        outbox_make_due(ids=ids)
        report = outbox_relay(ids=ids)
        level = messages.ERROR if report.failed else messages.SUCCESS
        self.message_user(request, f"Relay: {report}." + (" The broker refused some rows; they stay pending and "
                                                          "are retried automatically." if report.failed else ""),
                          level)


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(_SuperuserReadOnly):
    list_display = ("name", "pid", "started_at", "last_seen_at", "stopped_at")
    readonly_fields = list_display
