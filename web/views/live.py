"""Regions of a page that refresh themselves: the case page's notices section while a
notice is being sent, and the notification area that tells a person when a run they started ends."""

from __future__ import annotations

from datetime import datetime

from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from cases import selectors
from runs import selectors as run_selectors
from runs.models import RunStatus
from web.access import member_required
from web.case_page import case_page_context

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
    return render(request, "web/_notifications.html", {"ended_runs": runs})
