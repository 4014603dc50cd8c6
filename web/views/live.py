"""Regions of a page that refresh themselves: the case page's notices section while a
notice is being sent, and the notification area that tells a person when a run they started ends
(and updates the unread count on the bell); the notifications page, with its history; and the
"changed since" token the queue and the inbox poll to show new and changed items in place
(static/js/live-lists.js)."""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from audit.selectors import audit_latest_event_id
from cases import selectors
from runs import selectors as run_selectors
from runs.models import RunStatus
from web.access import member_required
from web.case_page import case_page_context
from web.notifications import chat_reply_urls, notifications_for_user
from web.services import notifications_mark_read

SESSION_KEY = "runs_seen_at"
ENDED = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.WAITING)
NOTIFICATIONS_SHOWN = 5


@require_GET
@member_required
def case_live_notices(request, reference: str):
    case = selectors.case_get_for_user(user=request.user, reference=reference)
    return render(request, "web/cases/_notices_region.html", case_page_context(request, case))


@require_GET
@member_required
def notifications(request):
    """Runs this person started that ended since they last heard (polled by the page header). The
    first poll of a session only starts the clock: nothing older is announced."""
    now = timezone.now()
    seen = request.session.get(SESSION_KEY)
    request.session[SESSION_KEY] = now.isoformat()
    runs = []
    if seen:
        since = datetime.fromisoformat(seen)
        runs = list(run_selectors.run_list_for_user(user=request.user)
                    .filter(started_by_user=request.user, status__in=ENDED, updated_at__gt=since)
                    .select_related("case").order_by("-updated_at")[:NOTIFICATIONS_SHOWN])
    replies = chat_reply_urls(user=request.user, runs=runs)  # a chat run's toast opens its reply
    for run in runs:
        run.reply_url = replies.get(run.pk)
    unread = sum(1 for n in notifications_for_user(user=request.user) if n.is_unread)
    return render(request, "web/_notifications.html", {"ended_runs": runs, "unread": unread})


@require_GET
@member_required
def list_changes(request):
    """The queue's and the inbox's "changed since" token: the id of the tenant's newest change to a
    case, its proposals or notices (every one is audited as a "cases." action). One indexed query;
    the page fetches its list again only when the token differs from the one it holds."""
    token = audit_latest_event_id(tenant_id=request.user.tenant_id, action_prefix="cases.")
    response = JsonResponse({"token": str(token)})
    response["Cache-Control"] = "no-store"
    return response


@require_GET
@member_required
def notification_list(request):
    """Every recent notification of this person, unread ones marked, each linking to its object."""
    shown_at = timezone.now()
    items = notifications_for_user(user=request.user)
    return render(request, "web/notifications.html", {
        "items": items, "unread": sum(1 for n in items if n.is_unread), "shown_at": shown_at.isoformat()})


@require_POST
@member_required
def notifications_read(request):
    """"Mark all read": up to the time the list was shown (`shown_at`), so nothing newer is lost."""
    try:
        until = datetime.fromisoformat(request.POST.get("shown_at", ""))
    except ValueError:
        until = None
    if until is None or until.tzinfo is None or until > timezone.now():
        messages.error(request, "That list could not be marked read; reload it and try again.")
        return redirect("web:notification_list")
    notifications_mark_read(user=request.user, until=until)
    messages.success(request, "Notifications marked read.")
    return redirect("web:notification_list")
