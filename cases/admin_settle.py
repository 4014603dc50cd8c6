"""Admin actions that settle a notice whose delivery is unknown. NoticeAdmin lists them;
they call cases.services.notice_settle with the reason typed in the action bar."""

from __future__ import annotations

from django.contrib import admin

from cases.admin_actions import run_service_action
from cases.services import notice_settle


@admin.action(description="Settle: the mail log shows it was sent (its own Message-ID; reason required)")
def settle_notices_sent(modeladmin, request, queryset):
    def settle(notice, reason):
        dispatch = getattr(notice, "dispatch", None)
        return notice_settle(actor=request.user, notice=notice, outcome="sent", reason=reason,
                             message_id=dispatch.message_id if dispatch else "")

    run_service_action(modeladmin, request, queryset, verb="Settled as sent", call=settle)


@admin.action(description="Settle: it did not go out — failed, can be sent again (reason required)")
def settle_notices_failed(modeladmin, request, queryset):
    run_service_action(modeladmin, request, queryset, verb="Settled as failed",
                       call=lambda notice, reason: notice_settle(actor=request.user, notice=notice, outcome="failed",
                                                                 reason=reason))


SETTLE_ACTIONS = [settle_notices_sent, settle_notices_failed]
