"""Tenants and people in the Django admin.

- Superusers manage every tenant and user.
- A staff user with the admin role manages the people of their own tenant: add, change, set a
  role or a password. They cannot make anyone a superuser, move anyone to another tenant, or
  delete anyone (deactivate instead: rows written by a person keep pointing at them).
- Any other staff user sees their own tenant's people, read-only.

Every addition, change and deletion made here is also written to the audit ledger (the admin's
own LogEntry is not tamper-evident; the audit chain is). Passwords never enter the audit payload."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.contrib.auth.forms import UserChangeForm, UserCreationForm
from django.db import transaction

from accounts.models import ApiKey, Role, Tenant, User
from accounts.services import api_key_create, api_key_revoke
from audit.services import audit_record
from core.db import retry_on_deadlock


def _audit(request, obj, action: str, change) -> None:
    tenant_id = obj.pk if isinstance(obj, Tenant) else obj.tenant_id
    with transaction.atomic():  # a savepoint inside the admin's own transaction where there is one
        audit_record(tenant_id=tenant_id, actor_type="user", actor_id=f"user:{request.user.pk}", action=action,
                     target_type=obj._meta.model_name, target_id=obj.pk, decision="allowed",
                     payload={"object": str(obj), "change": change, "via": "django-admin"})


class AuditedAdminMixin:
    """Mirror the admin's change log into the audit ledger."""

    audit_prefix = ""

    def log_addition(self, request, obj, message):
        _audit(request, obj, f"{self.audit_prefix}.created", message)
        return super().log_addition(request, obj, message)

    def log_change(self, request, obj, message):
        _audit(request, obj, f"{self.audit_prefix}.changed", message)
        return super().log_change(request, obj, message)

    def log_deletions(self, request, queryset):
        for obj in queryset:
            _audit(request, obj, f"{self.audit_prefix}.deleted", [])
        return super().log_deletions(request, queryset)


def _is_tenant_admin(user) -> bool:
    return user.is_active and user.is_staff and user.tenant_id is not None and user.role == Role.ADMIN


def is_tenant_staff(user) -> bool:
    return user.is_active and user.is_staff and (user.is_superuser or user.tenant_id is not None)


@admin.register(Tenant)
class TenantAdmin(AuditedAdminMixin, admin.ModelAdmin):
    audit_prefix = "accounts.tenant"
    list_display = ("name", "slug", "people", "created_at")
    search_fields = ("name", "slug")
    readonly_fields = ("created_at",)

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(pk=request.user.tenant_id)

    @admin.display(description="people")
    def people(self, tenant: Tenant) -> int:
        return tenant.users.count()

    def has_module_permission(self, request):
        return is_tenant_staff(request.user)

    def has_view_permission(self, request, obj=None):
        if not is_tenant_staff(request.user):
            return False
        return obj is None or request.user.is_superuser or obj.pk == request.user.tenant_id

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser


class TenantStaffPermissions:
    """Who sees and adds a tenant's rows in the admin: a superuser everything; a tenant's staff
    their own tenant's; only a superuser or a tenant admin adds."""

    def has_module_permission(self, request):
        return is_tenant_staff(request.user)

    def has_view_permission(self, request, obj=None):
        if not is_tenant_staff(request.user):
            return False
        return obj is None or request.user.is_superuser or obj.tenant_id == request.user.tenant_id

    def has_add_permission(self, request):
        return request.user.is_superuser or _is_tenant_admin(request.user)


class ArbiterUserCreationForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username", "tenant", "role")


class ArbiterUserChangeForm(UserChangeForm):
    class Meta(UserChangeForm.Meta):
        model = User

    def clean(self):
        cleaned = super().clean()
        # The database refuses a person without a tenant unless they are a superuser; say so on the
        # form instead of failing with an IntegrityError.
        if "tenant" in self.fields and not cleaned.get("tenant") and not cleaned.get(
                "is_superuser", self.instance.is_superuser):
            self.add_error("tenant", "Everyone but a superuser belongs to a tenant.")
        return cleaned


@admin.register(User)
class UserAdmin(TenantStaffPermissions, AuditedAdminMixin, DjangoUserAdmin):
    audit_prefix = "accounts.user"
    form = ArbiterUserChangeForm
    add_form = ArbiterUserCreationForm
    list_display = ("username", "email", "tenant", "role", "is_staff", "is_superuser", "is_active", "last_login")
    list_filter = ("role", ("tenant", admin.RelatedOnlyFieldListFilter), "is_staff", "is_superuser", "is_active")
    search_fields = ("username", "email", "first_name", "last_name")
    list_select_related = ("tenant",)
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        ("Arbiter", {"fields": ("tenant", "role")}),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        ("Access", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
        ("Important dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = (
        (None, {"classes": ("wide",), "fields": ("username", "tenant", "role", "password1", "password2")}),
    )

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(tenant_id=request.user.tenant_id)

    def has_change_permission(self, request, obj=None):
        if request.user.is_superuser:
            return True
        if not _is_tenant_admin(request.user):
            return False
        # A tenant admin never edits a superuser (that would be a way to take over the platform).
        return obj is None or (obj.tenant_id == request.user.tenant_id and not obj.is_superuser)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def get_readonly_fields(self, request, obj=None):
        if request.user.is_superuser:
            return ("last_login", "date_joined")
        return ("tenant", "is_superuser", "groups", "user_permissions", "last_login", "date_joined")

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None and not request.user.is_superuser:
            # A tenant admin adds people to their own tenant only (set in save_model).
            return ((None, {"classes": ("wide",), "fields": ("username", "role", "password1", "password2")}),)
        return fieldsets

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        if obj is None and request.user.is_superuser and "tenant" in form.base_fields:
            form.base_fields["tenant"].required = True
        return form

    def save_model(self, request, obj, form, change):
        if not change and not request.user.is_superuser:
            obj.tenant_id = request.user.tenant_id  # tenant is not on a tenant admin's add form
        super().save_model(request, obj, form, change)


# --- API keys ---------------------------------------------------------------------------

class ApiKeyCreationForm(forms.ModelForm):
    role = forms.ChoiceField(choices=Role.choices, help_text="What the key may do (as a person with this role).")

    class Meta:
        model = ApiKey
        fields = ("tenant", "name", "expires_at")


@admin.register(ApiKey)
class ApiKeyAdmin(TenantStaffPermissions, admin.ModelAdmin):
    """API keys are created here (the key is shown once, in the confirmation message) and revoked
    with the action; nothing else about a key is edited. Tenant admins see their own tenant's keys."""

    list_display = ("name", "prefix", "tenant", "role", "created_at", "expires_at", "revoked_at", "last_used_at")
    list_filter = (("tenant", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("name", "prefix")
    actions = ["revoke_keys"]
    readonly_fields = ("tenant", "user", "name", "prefix", "created_by", "created_at", "expires_at", "revoked_at",
                       "last_used_at")
    exclude = ("secret_hash",)

    def get_queryset(self, request):
        qs = super().get_queryset(request).select_related("tenant", "user")
        return qs if request.user.is_superuser else qs.filter(tenant_id=request.user.tenant_id)

    @admin.display(description="role")
    def role(self, api_key: ApiKey) -> str:
        return api_key.user.role

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = ApiKeyCreationForm
            kwargs["fields"] = ("tenant", "name", "role", "expires_at") if request.user.is_superuser \
                else ("name", "role", "expires_at")
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("tenant", "name", "role", "expires_at") if request.user.is_superuser \
                else ("name", "role", "expires_at")
        return self.readonly_fields

    def save_model(self, request, obj, form, change):
        from django.contrib import messages


        tenant = form.cleaned_data.get("tenant") or request.user.tenant
        api_key, key = api_key_create(tenant=tenant, name=form.cleaned_data["name"], role=form.cleaned_data["role"],
                                      actor=request.user, expires_at=form.cleaned_data.get("expires_at"))
        obj.pk = api_key.pk
        messages.warning(request, f"The API key, shown only this once — store it now: {key}")

    def log_addition(self, request, obj, message):
        return None  # api_key_create wrote the audit event

    @admin.action(description="Revoke the selected API keys")
    def revoke_keys(self, request, queryset):
        from django.contrib import messages


        revoked = 0
        for api_key in queryset.filter(revoked_at__isnull=True):
            retry_on_deadlock(api_key_revoke)(api_key=api_key, actor=request.user)  # each key on its own
            revoked += 1
        messages.info(request, f"Revoked {revoked} key(s).")

    def has_revoke_keys_permission(self, request):
        return request.user.is_superuser or _is_tenant_admin(request.user)

    revoke_keys.allowed_permissions = ("revoke_keys",)
