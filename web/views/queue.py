"""The case queue (find the work): search, filters, quick views, sortable columns, saved views,
keyset pages, and taking an unassigned case in one click.

Reads go through cases.selectors.case_list_for_user (tenant-scoped); the writes are one service
call each (cases.services.case_take, web.services for saved views)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from cases import policy, selectors, services
from cases.selectors import CASE_SORTS, QUICK_VIEWS
from cases.services.case import CAN_TAKE_CASES
from core.errors import DomainError, Invalid
from reports.filters import NONE_VALUE
from reports.selectors import DEADLINE_TYPES, DECISION_BUCKETS, DUE_STATES
from web import services as web_services
from web.access import member_required
from web.actors import tenant_users
from web.errors import error_context, status_for
from web.forms import DEFAULT_SORT, SORT_LABELS, CaseFilterForm, SavedViewForm
from web.keyset import keyset_page

CASES_PER_PAGE = 25
COUNT_LIMIT = 1000  # the queue says "1,000+" past this rather than count 100,000 rows on every page


def is_partial(request, target: str) -> bool:
    """An htmx request aimed at one region of the page (not a history restore, which needs the
    whole page)."""
    return bool(request.htmx) and not request.htmx.history_restore_request and request.htmx.target == target


def may_take(user) -> bool:
    return user.role in CAN_TAKE_CASES


def _sort_links(request, current: str) -> dict[str, dict]:
    """Per sortable column: the URL that sorts by it (toggling the direction when it is the current
    sort) and its aria-sort state."""
    query = request.GET.copy()
    for key in ("after", "before", "sort"):
        query.pop(key, None)
    links = {}
    for name in SORT_LABELS:
        if name not in CASE_SORTS:
            continue
        descending_default = CASE_SORTS[name][1]
        if current.lstrip("-") == name:
            target = name if current.startswith("-") else f"-{name}"
            state = "descending" if current.startswith("-") else "ascending"
        else:
            target, state = (f"-{name}" if descending_default else name), "none"
        query["sort"] = target
        links[name] = {"url": f"?{query.urlencode()}", "aria_sort": state}
    return links


def _view_links(request) -> dict[str, str]:
    """Per quick view: its URL, keeping the search, filters and sort of this one (a quick view
    changes the view only; a chosen page or saved view does not carry over)."""
    query = request.GET.copy()
    for key in ("after", "before", "view", "saved"):
        query.pop(key, None)
    links = {}
    for value in ("", *QUICK_VIEWS):
        linked = query.copy()
        if value:
            linked["view"] = value
        links[value] = f"?{linked.urlencode()}"
    return links


def describe_dashboard_filter(form: CaseFilterForm) -> str:
    """The dashboard's conditions in this URL, in words ("" when there are none)."""
    values = form.dashboard_values()
    parts = []
    if values.get("team"):
        parts.append("team: " + ("no team" if values["team"] == NONE_VALUE else values["team"]))
    if values.get("month"):
        parts.append(f"received in {values['month']}")
    if values.get("open"):
        parts.append("open cases only")
    if values.get("deadline") and values.get("due"):
        parts.append(f"{DEADLINE_TYPES[values['deadline']].lower()} {DUE_STATES[values['due']].lower()}")
    if values.get("sla"):
        measure, _, outcome = values["sla"].partition("_")
        parts.append(f"{measure == 'acknowledge' and 'acknowledgement' or 'answer'} "
                     f"{'on time' if outcome == 'met' else 'late or missing'}")
    if values.get("decided_in"):
        parts.append("decided " + dict((b[0], b[1]) for b in DECISION_BUCKETS)[values["decided_in"]].lower())
    return "; ".join(parts)


def queue_context(request, *, form: CaseFilterForm) -> tuple[dict, int]:
    status = 200
    notes = []
    if not form.is_valid():
        status = 400  # e.g. an unknown status in a hand-edited URL: say so, list with the rest
    kwargs = form.selector_kwargs()
    sort = form.sort_value if form.is_valid() else DEFAULT_SORT
    kwargs["sort"], kwargs["descending"] = sort.lstrip("-"), sort.startswith("-")
    cases = selectors.case_list_for_user(user=request.user, **kwargs).filter(
        form.queue_filter().condition(tenant_id=request.user.tenant_id, today=timezone.localdate()))
    try:
        page = keyset_page(cases, key="sort_key", descending=sort.startswith("-"),
                           cursor=request.GET.get("after"), before=request.GET.get("before"), size=CASES_PER_PAGE)
    except Invalid as error:
        notes.append(error.message)
        status = 400
        page = keyset_page(cases, key="sort_key", descending=sort.startswith("-"), size=CASES_PER_PAGE)
    # Always one capped count (not skipped for a short list), so the query count is the same at any size.
    total = cases.order_by()[:COUNT_LIMIT + 1].count()
    query = request.GET.copy()
    for key in ("after", "before"):
        query.pop(key, None)
    view = form.cleaned_data.get("view") if hasattr(form, "cleaned_data") else ""
    return {
        "form": form, "page": page, "query": query.urlencode(), "total": total,
        "total_is_capped": total > COUNT_LIMIT, "count_limit": COUNT_LIMIT, "notes": notes,
        "is_filtered": form.is_filtered, "sort": sort, "sort_links": _sort_links(request, sort),
        "view": view or "", "view_links": _view_links(request), "may_take": may_take(request.user),
        "today": timezone.localdate(), "dashboard_values": form.dashboard_values(),
        "dashboard_description": describe_dashboard_filter(form),
        "may_decide": request.user.role in (policy.CAN_APPROVE_PROPOSALS | policy.CAN_APPROVE_NOTICES),
    }, status


@member_required
@vary_on_headers("HX-Request", "HX-Target")
def case_list(request):
    users = list(tenant_users(tenant_id=request.user.tenant_id))
    form = CaseFilterForm(request.GET, users=users)
    context, status = queue_context(request, form=form)
    context |= {"may_create": request.user.role in policy.CAN_CREATE_CASES,
                "saved_views": list(web_services.saved_views_for_user(user=request.user)),
                "save_form": SavedViewForm(initial={"query": context["query"]})}
    template = "web/cases/_results.html" if is_partial(request, "case-results") else "web/cases/list.html"
    return render(request, template, context, status=status)


@require_POST
@member_required
def case_take(request, reference: str):
    """Take an unassigned case. htmx answers with the case's queue row (its focusable message
    says what happened); a plain post goes back to where it came from with the message."""
    case = selectors.case_get_for_user(user=request.user, reference=reference)
    error = None
    try:
        expected = request.POST.get("expected_version")
        services.case_take(actor=request.user, case=case,
                           expected_version=int(expected) if (expected or "").isdigit() else None)
    except DomainError as refusal:
        error = refusal
    if not request.htmx:
        if error is None:
            messages.success(request, f"{case.reference} is now yours.")
        else:
            messages.error(request, error.message)
        back = request.POST.get("next") or ""
        return redirect(back if back.startswith("/") and not back.startswith("//") else reverse("web:case_list"))
    row = selectors.case_list_for_user(user=request.user).get(pk=case.pk)
    context = {"case": row, "may_take": may_take(request.user), "today": timezone.localdate(), "row_message": (
        {"code": "ok", "title": f"{case.reference} is now yours.", "message": ""} if error is None
        else error_context(error))}
    return render(request, "web/cases/_row.html", context, status=200 if error is None else status_for(error))


@require_POST
@member_required
def saved_view_save(request):
    form = SavedViewForm(request.POST)
    if form.is_valid():
        try:
            view = web_services.saved_view_save(user=request.user, name=form.cleaned_data["name"],
                                                query=form.cleaned_data["query"])
        except DomainError as error:
            messages.error(request, f"{error.message} {' '.join(sum(error.fields.values(), []))}".strip())
        else:
            messages.success(request, f"Saved view “{view.name}”.")
            return redirect(f"{reverse('web:case_list')}?{view.query}&saved={view.pk}")
    else:
        messages.error(request, "The view was not saved: give it a name (at most 80 characters).")
    return redirect(f"{reverse('web:case_list')}?{form.data.get('query', '')}")


@require_POST
@member_required
def saved_view_delete(request, pk: int):
    try:
        web_services.saved_view_delete(user=request.user, pk=pk)
    except DomainError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Saved view deleted.")
    return redirect("web:case_list")
