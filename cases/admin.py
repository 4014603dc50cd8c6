"""Operations views for the case domain.

Nothing here writes a domain row itself. Every field is read-only; a case's or a notice's status
changes only through the admin ACTIONS below, which call cases.services with the logged-in person
as the actor — so the policy layer decides (a role that may not decide a case is refused here as
everywhere), and every change gets its CaseEvent and AuditEvent. A refusal is shown as an error
message naming the object and what to do; it is never a 500 and changes nothing.

Who sees what: superusers see every tenant; any other staff user sees only their own tenant's
rows (querysets, list filters and object pages are all scoped), whatever Django permissions
they hold. Roles, not Django permissions, decide what the actions may do."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm

from cases import services
from cases.admin_actions import run_service_action
from cases.admin_settle import SETTLE_ACTIONS
from cases.models import (
    CASE_TRANSITIONS,
    Approval,
    Case,
    CaseEvent,
    CaseReferenceCounter,
    CaseWords,
    DeadlineCrossing,
    DeadlinePolicy,
    Evidence,
    EvidenceExtraction,
    Notice,
    NoticeDispatch,
    NoticeStatus,
    Proposal,
)
from cases.services.deadlines import POLICY_FIELDS, deadline_policy_current
from core.errors import Conflict, DomainError

# --- shared building blocks (other apps' admins may reuse them) --------------------------------


class TenantScopedAdmin(admin.ModelAdmin):
    """Superusers see every tenant; other staff users see their own tenant's rows only.

    Access follows the user's tenant instead of per-model Django permissions: the services check
    the role for every action, so a Django permission could never grant more than the policy."""

    tenant_lookup = "tenant"  # path from this model to its tenant

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.tenant_lookup}_id": request.user.tenant_id}) if request.user.tenant_id \
            else qs.none()

    def _is_tenant_staff(self, request) -> bool:
        user = request.user
        return user.is_active and user.is_staff and (user.is_superuser or user.tenant_id is not None)

    def has_module_permission(self, request):
        return self._is_tenant_staff(request)

    def has_view_permission(self, request, obj=None):
        if not self._is_tenant_staff(request):
            return False
        if obj is None or request.user.is_superuser:
            return True
        return _tenant_id_of(obj, self.tenant_lookup) == request.user.tenant_id

    def get_list_filter(self, request):
        # Foreign-key filters list only the values present in this (scoped) queryset, so a staff
        # user never learns another tenant's name or users from a filter sidebar.
        return [(name, admin.RelatedOnlyFieldListFilter) if name in self.related_filters else name
                for name in super().get_list_filter(request)]

    related_filters: tuple[str, ...] = ("tenant",)


def _tenant_id_of(obj, lookup: str):
    target = obj
    *path, last = lookup.split("__")
    for step in path:
        target = getattr(target, step)
    return getattr(target, f"{last}_id")


class ReadOnlyAdmin(TenantScopedAdmin):
    """Rows written once by the services (events, evidence, approvals, dispatches): viewable,
    never added, changed or deleted here."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields]


class ReasonActionForm(ActionForm):
    """The action bar gains a text box: the reason or note some actions need (decide, reopen,
    return to review, rejections). The service says when one is missing."""

    reason = forms.CharField(required=False, label="Reason / note",
                             widget=forms.TextInput(attrs={"size": 50, "placeholder": "needed by some actions"}))
    # Deciding/closing a case on which no notice was sent needs an explicit confirmation.
    confirm_reason = forms.CharField(required=False, label="Confirm (no notice sent)",
                                     widget=forms.TextInput(attrs={"size": 40,
                                                                   "placeholder": "why decide/close without a notice"}))


# --- cases --------------------------------------------------------------------------------------


class EvidenceInline(admin.TabularInline):
    model = Evidence
    fields = ("title", "kind", "content_type", "size", "sha256", "added_by", "created_at")
    readonly_fields = fields
    extra = 0
    show_change_link = True
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return True  # shown only inside a case page the parent admin already let this user see


class CaseEventInline(admin.TabularInline):
    model = CaseEvent
    fields = ("sequence", "event_type", "case_version", "actor_id", "run_id", "policy_version", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("sequence",)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return True  # shown only inside a case page the parent admin already let this user see


def _transition_action(transition: str):
    label = transition.replace("_", " ")

    def action(modeladmin, request, queryset):
        run_service_action(modeladmin, request, queryset, verb=f"{label.capitalize()} done",
                           call=lambda case, reason: services.case_transition(
                               actor=request.user, case=case, transition=transition, reason=reason,
                               confirm_reason=(request.POST.get("confirm_reason") or "").strip()))

    action.__name__ = f"transition_{transition}"
    return admin.action(description=f"Transition: {label} (through the case service)")(action)


@admin.register(Case)
class CaseAdmin(TenantScopedAdmin):
    list_display = ("reference", "short_title", "tenant", "status", "risk_level", "product", "assigned_team",
                    "assignee", "version", "received_at")
    list_filter = ("status", "risk_level", "tenant", "product", "source")
    related_filters = ("tenant",)
    search_fields = ("reference", "title", "company", "product", "source_reference", "complainant_email")
    list_select_related = ("tenant", "assignee")
    inlines = (EvidenceInline, CaseEventInline)
    action_form = ReasonActionForm
    actions = [_transition_action(name) for name in CASE_TRANSITIONS]

    # Writing a case field here would bypass the services (no event, no audit, a replay that no
    # longer matches the row): the whole row is read-only; actions are the way to change it.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in Case._meta.fields]

    @admin.display(description="title", ordering="title")
    def short_title(self, case: Case) -> str:
        return case.title[:70]


@admin.register(Evidence)
class EvidenceAdmin(ReadOnlyAdmin):
    list_display = ("id", "case", "title", "kind", "content_type", "size", "short_sha256", "added_by", "created_at")
    list_filter = ("kind", "content_type", "tenant")
    search_fields = ("title", "case__reference", "sha256", "filename")
    list_select_related = ("case",)

    @admin.display(description="sha256")
    def short_sha256(self, evidence: Evidence) -> str:
        return evidence.sha256[:12]


@admin.register(CaseEvent)
class CaseEventAdmin(ReadOnlyAdmin):
    list_display = ("case", "sequence", "event_type", "case_version", "actor_type", "actor_id", "run_id",
                    "policy_version", "created_at")
    list_filter = ("event_type", "actor_type", "policy_version", "tenant")
    search_fields = ("case__reference", "actor_id", "run_id", "event_type")
    list_select_related = ("case",)


@admin.register(CaseWords)
class CaseWordsAdmin(ReadOnlyAdmin):
    """The search document of each case (PostgreSQL; kept by database triggers): to see which words a
    case is found by."""

    list_display = ("case", "tenant_id")
    search_fields = ("case__reference",)
    list_select_related = ("case",)


@admin.register(CaseReferenceCounter)
class CaseReferenceCounterAdmin(ReadOnlyAdmin):
    list_display = ("tenant", "year", "value")
    list_filter = ("year", "tenant")


# --- proposals ---------------------------------------------------------------------------------


@admin.register(Proposal)
class ProposalAdmin(TenantScopedAdmin):
    list_display = ("id", "case", "kind", "summary", "status", "proposer_type", "proposer_id", "case_version",
                    "policy_version", "decided_by", "created_at")
    list_filter = ("status", "kind", "proposer_type", "policy_version", "tenant")
    search_fields = ("case__reference", "rationale", "proposer_id", "run_id")
    list_select_related = ("case", "decided_by")
    action_form = ReasonActionForm
    actions = ["approve_proposals", "reject_proposals", "withdraw_proposals"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in Proposal._meta.fields]

    @admin.action(description="Approve and apply (four eyes; refused when stale)")
    def approve_proposals(self, request, queryset):
        run_service_action(self, request, queryset, verb="Approved and applied",
                           call=lambda proposal, reason: services.proposal_approve(
                               actor=request.user, proposal=proposal, note=reason,
                               confirm_reason=(request.POST.get("confirm_reason") or "").strip()))

    @admin.action(description="Reject (needs a reason)")
    def reject_proposals(self, request, queryset):
        run_service_action(self, request, queryset, verb="Rejected",
                           call=lambda proposal, reason: services.proposal_reject(
                               actor=request.user, proposal=proposal, note=reason))

    @admin.action(description="Withdraw")
    def withdraw_proposals(self, request, queryset):
        run_service_action(self, request, queryset, verb="Withdrawn",
                           call=lambda proposal, reason: services.proposal_withdraw(
                               actor=request.user, proposal=proposal))


# --- notices -----------------------------------------------------------------------------------


@admin.register(Notice)
class NoticeAdmin(TenantScopedAdmin):
    list_display = ("id", "case", "subject", "recipient", "status", "version", "drafted_by", "submitted_by",
                    "sent_at")
    list_filter = ("status", "kind", "tenant")
    search_fields = ("case__reference", "subject", "recipient", "external_message_id")
    list_select_related = ("case",)
    action_form = ReasonActionForm
    # No "approve" action here: an approval is bound to the exact text the approver read (its content
    # hash, sent by the form that showed it). A bulk action on a changelist row approves whatever the
    # row holds at the click, unseen; approvals happen on the case page or through the API instead.
    actions = ["submit_notices", "reject_notices", "withdraw_notices", "dispatch_notices"]  # + settle (below)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in Notice._meta.fields]

    @admin.action(description="Submit for approval")
    def submit_notices(self, request, queryset):
        run_service_action(self, request, queryset, verb="Submitted",
                           call=lambda notice, reason: services.notice_submit(actor=request.user, notice=notice))

    @admin.action(description="Reject (needs a reason)")
    def reject_notices(self, request, queryset):
        run_service_action(self, request, queryset, verb="Rejected",
                           call=lambda notice, reason: services.notice_reject(
                               actor=request.user, notice=notice, note=reason))

    @admin.action(description="Withdraw")
    def withdraw_notices(self, request, queryset):
        run_service_action(self, request, queryset, verb="Withdrawn",
                           call=lambda notice, reason: services.notice_withdraw(actor=request.user, notice=notice))

    @admin.action(description="Send now (exactly once)")
    def dispatch_notices(self, request, queryset):
        run_service_action(self, request, queryset, verb="Sent",
                           call=lambda notice, reason: _dispatch_or_raise(actor=request.user, notice=notice))


# Settling a notice whose delivery is unknown (cases/admin_settle.py).
NoticeAdmin.actions = [*NoticeAdmin.actions, *SETTLE_ACTIONS]


def _dispatch_or_raise(*, actor, notice: Notice) -> Notice:
    """A send that failed is recorded by the service (notice `failed`, retryable) rather than
    raised; the admin must still say it failed instead of reporting success."""
    result = services.notice_dispatch(actor=actor, notice=notice)
    if result.status == NoticeStatus.UNKNOWN:
        raise Conflict("The mail server may have the message (its final reply never came); it is not re-sent. "
                       "Check the mail log for its Message-ID, then use a Settle action.")
    if result.status != NoticeStatus.SENT:
        error = NoticeDispatch.objects.filter(notice=result).values_list("last_error", flat=True).first()
        raise Conflict(f"Sending failed ({error or 'see its notice dispatch'}); the notice is left failed and "
                       f"can be sent again.")
    return result


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("id", "decision", "notice", "proposal", "approver", "short_hash", "case_version",
                    "policy_version", "voided_at", "created_at")
    list_filter = ("decision", "policy_version", "tenant")
    search_fields = ("note", "content_hash", "approver__username", "notice__case__reference",
                     "proposal__case__reference")
    list_select_related = ("approver", "notice", "proposal")

    @admin.display(description="content hash")
    def short_hash(self, approval: Approval) -> str:
        return approval.content_hash[:12]


@admin.register(NoticeDispatch)
class NoticeDispatchAdmin(ReadOnlyAdmin):
    list_display = ("notice", "status", "attempts", "message_id", "dispatched_by", "started_at", "sent_at")
    list_filter = ("status", "tenant")
    search_fields = ("message_id", "notice__case__reference", "dispatched_by")
    list_select_related = ("notice",)


# --- deadline policies: versioned; "adding" one creates the tenant's next version -------

class DeadlinePolicyForm(forms.ModelForm):
    class Meta:
        model = DeadlinePolicy
        fields = ("country", "subdivision", "acknowledge_days", "acknowledge_day_count", "response_days",
                  "response_day_count", "close_days", "close_day_count", "due_soon_days",
                  "pause_while_waiting_for_evidence")


@admin.register(DeadlinePolicy)
class DeadlinePolicyAdmin(TenantScopedAdmin):
    """Versions are never edited: a change is a new version, made through
    cases.services.deadline_policy_create (role-checked, audited, open cases recomputed)."""

    form = DeadlinePolicyForm
    list_display = ("tenant", "version", "country", "subdivision", "acknowledge_days", "acknowledge_day_count",
                    "response_days", "response_day_count", "close_days", "close_day_count", "due_soon_days",
                    "pause_while_waiting_for_evidence", "created_by", "created_at")
    list_filter = ("tenant",)

    def has_add_permission(self, request):
        return self._is_tenant_staff(request) and request.user.tenant_id is not None

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_changeform_initial_data(self, request):
        current = deadline_policy_current(tenant_id=request.user.tenant_id)
        return {name: getattr(current, name) for name in POLICY_FIELDS}

    def save_model(self, request, obj, form, change):
        try:
            created = services.deadline_policy_create(
                actor=request.user, tenant=request.user.tenant,
                **{name: form.cleaned_data[name] for name in DeadlinePolicyForm.Meta.fields})
        except DomainError as error:
            fields = "; ".join(f"{k}: {' '.join(v)}" for k, v in error.fields.items())
            raise _AdminRefusal(f"{error.message} {fields}".strip()) from None
        obj.pk, obj.version = created.pk, created.version

    def add_view(self, request, form_url="", extra_context=None):
        try:
            return super().add_view(request, form_url, extra_context)
        except _AdminRefusal as refusal:
            from django.shortcuts import redirect

            self.message_user(request, str(refusal), messages.ERROR)
            return redirect(request.path)


class _AdminRefusal(Exception):
    pass


@admin.register(DeadlineCrossing)
class DeadlineCrossingAdmin(ReadOnlyAdmin):
    list_display = ("case", "deadline", "state", "due", "created_at")
    list_filter = ("state", "deadline", "tenant")
    list_select_related = ("case",)


@admin.register(EvidenceExtraction)
class EvidenceExtractionAdmin(ReadOnlyAdmin):
    list_display = ("evidence", "status", "reason", "page_count", "extractor", "finished_at")
    list_filter = ("status", "tenant")
    list_select_related = ("evidence",)
