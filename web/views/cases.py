"""New case form, case page and evidence download (the queue is web.views.queue)."""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse
from django.shortcuts import redirect, render
from django.views.decorators.vary import vary_on_headers

from cases import policy, selectors, services
from cases.models import EvidenceKind
from core.errors import DomainError, Forbidden, NotFound
from web.access import member_required
from web.case_page import case_page_context
from web.errors import add_to_form, status_for
from web.forms import CaseCreateForm
from web.views.queue import is_partial  # noqa: E402,F401  (kept importable from here)


@member_required
def case_create(request):
    if request.user.role not in policy.CAN_CREATE_CASES:
        raise Forbidden(f"Your role ({request.user.role}) cannot open cases; analysts, supervisors and "
                        f"administrators can.")
    form = CaseCreateForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                case = services.case_create(actor=request.user, tenant=request.user.tenant, **form.service_kwargs())
            except DomainError as error:
                add_to_form(form, error)
                status = status_for(error)
            else:
                messages.success(request, f"{case.reference} opened.")
                return redirect("web:case_detail", reference=case.reference)
    return render(request, "web/cases/create.html", {"form": form}, status=status)


@member_required
@vary_on_headers("HX-Request")
def case_detail(request, reference: str):
    case = selectors.case_get_for_user(user=request.user, reference=reference)
    context = case_page_context(request, case)
    # A cited quote selected on a proposal card (hx-get ...?quote=) swaps the body in place.
    template = "web/cases/_body.html" if request.htmx else "web/cases/detail.html"
    return render(request, template, context, status=400 if context["quote_refused"] else 200)


@member_required
def evidence_download(request, reference: str, pk: int):
    case = selectors.case_get_for_user(user=request.user, reference=reference)
    evidence = selectors.evidence_get_for_user(user=request.user, pk=pk)
    if evidence.case_id != case.pk or evidence.kind != EvidenceKind.FILE:
        raise NotFound("No such file on this case.")
    # Always an attachment with the recorded type: an uploaded file is never rendered as a page.
    response = FileResponse(evidence.file.open("rb"), as_attachment=True, filename=evidence.filename,
                            content_type=evidence.content_type)
    response["X-Content-Type-Options"] = "nosniff"
    return response
