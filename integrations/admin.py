"""Webhooks in the admin: endpoints are registered here (the signing secret is shown once, in the
confirmation message) and disabled, enabled or deleted with actions (a deleted endpoint leaves the
list; its deliveries and their attempt log stay under deliveries); deliveries and their attempt
log are read-only, with a redeliver action. Everything goes through integrations.webhooks; a staff user
sees their own tenant only."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from accounts.admin import is_tenant_staff
from core.errors import DomainError
from integrations.models import EventType, IntegrationEvent, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from integrations.webhooks import (
    MANAGERS,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_update,
    webhook_redeliver,
    webhook_url_check,
)


def _may_manage(user) -> bool:
    return is_tenant_staff(user) and user.tenant_id is not None and user.role in MANAGERS


class TenantScopedAdmin(admin.ModelAdmin):
    tenant_field = "tenant_id"

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(**{self.tenant_field: request.user.tenant_id})

    def has_module_permission(self, request):
        return is_tenant_staff(request.user)

    def has_view_permission(self, request, obj=None):
        return is_tenant_staff(request.user)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=500, assume_scheme="https")
    event_types = forms.MultipleChoiceField(choices=EventType.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = WebhookEndpoint
        fields = ("url", "description", "event_types")

    def clean_url(self):
        """The service's URL check, as a form error (the service checks again when it saves)."""
        try:
            return webhook_url_check(self.cleaned_data["url"])
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from exc


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(TenantScopedAdmin):
    list_display = ("url", "tenant", "event_types", "is_active", "failing_since", "disabled_reason", "created_at")
    list_filter = ("is_active",)
    actions = ["disable", "enable", "delete_endpoints"]
    readonly_fields = ("tenant", "url", "description", "event_types", "is_active", "disabled_at", "disabled_reason",
                       "consecutive_failures", "failing_since", "previous_secret_expires_at", "created_by",
                       "created_at", "updated_at")
    exclude = ("secret", "previous_secret")

    def get_queryset(self, request):
        return super().get_queryset(request).filter(deleted_at__isnull=True)

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # deleting goes through the service (delete_endpoints)
        return actions

    def has_add_permission(self, request):
        return _may_manage(request.user)

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = WebhookEndpointForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return ("url", "description", "event_types") if obj is None else self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def save_model(self, request, obj, form, change):
        endpoint, secret = webhook_endpoint_create(actor=request.user, url=form.cleaned_data["url"],
                                                   event_types=form.cleaned_data["event_types"],
                                                   description=form.cleaned_data.get("description", ""))
        obj.pk = endpoint.pk
        messages.warning(request, f"The signing secret, shown only this once — store it now: {secret}")

    def log_addition(self, request, obj, message):
        return None  # webhook_endpoint_create wrote the audit event

    def _set_active(self, request, queryset, active: bool):
        for endpoint in queryset:
            try:
                webhook_endpoint_update(actor=request.user, endpoint=endpoint, is_active=active)
            except DomainError as exc:
                messages.error(request, exc.message)
                return

    @admin.action(description="Disable the selected endpoints", permissions=["manage"])
    def disable(self, request, queryset):
        self._set_active(request, queryset, False)

    @admin.action(description="Enable the selected endpoints (sends the events queued meanwhile)",
                  permissions=["manage"])
    def enable(self, request, queryset):
        self._set_active(request, queryset, True)

    @admin.action(description="Delete the selected endpoints (queued deliveries are cancelled; the log is kept)",
                  permissions=["manage"])
    def delete_endpoints(self, request, queryset):
        deleted = 0
        for endpoint in queryset:
            try:
                webhook_endpoint_delete(actor=request.user, endpoint=endpoint)
            except DomainError as exc:
                messages.error(request, exc.message)
                return
            deleted += 1
        messages.success(request, f"{deleted} endpoint{'s' if deleted != 1 else ''} deleted.")

    def has_manage_permission(self, request):
        return _may_manage(request.user)


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "started_at", "duration_ms", "status_code", "error_category", "succeeded")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(TenantScopedAdmin):
    tenant_field = "endpoint__tenant_id"
    list_display = ("id", "endpoint", "event", "status", "attempts", "next_attempt_at", "last_status_code",
                    "delivered_at")
    list_filter = ("status",)
    list_select_related = ("endpoint", "event")
    readonly_fields = ("endpoint", "event", "status", "attempts", "next_attempt_at", "locked_until",
                       "last_status_code", "last_error_category", "delivered_at", "created_at")
    inlines = [WebhookAttemptInline]
    actions = ["redeliver"]

    @admin.action(description="Deliver the selected events again", permissions=["manage"])
    def redeliver(self, request, queryset):
        for delivery in queryset:
            try:
                webhook_redeliver(actor=request.user, delivery=delivery)
            except DomainError as exc:
                messages.error(request, f"Delivery {delivery.pk}: {exc.message}")

    def has_manage_permission(self, request):
        return _may_manage(request.user)


@admin.register(IntegrationEvent)
class IntegrationEventAdmin(TenantScopedAdmin):
    list_display = ("id", "type", "tenant", "feed_sequence", "occurred_at")
    list_filter = ("type",)
    readonly_fields = ("tenant", "type", "audit_event", "data", "occurred_at", "feed_sequence")
