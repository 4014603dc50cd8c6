"""Complaints in: the upload page of bulk intake (supervisors only), an import's progress (polled
by htmx while it runs) and its error report."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.http import FileResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core.errors import DomainError, Forbidden, NotFound
from intake import selectors
from intake.services import CAN_IMPORT, complaint_import_start
from web.access import member_required
from web.errors import add_to_form, status_for

FORBIDDEN_MESSAGE = ("Importing complaints is open to supervisors only. Ask a supervisor to import the file, "
                     "or to change your role if you should.")


class ImportUploadForm(forms.Form):
    file = forms.FileField(label="CFPB complaints file (CSV)",
                           help_text="The CSV exported from the CFPB complaint portal, in UTF-8. Complaints imported "
                                     "before are skipped.",
                           widget=forms.ClearableFileInput(attrs={"accept": ".csv,text/csv"}))


def _require_importer(user) -> None:
    if user.role not in CAN_IMPORT:
        raise Forbidden(FORBIDDEN_MESSAGE)


@member_required
@require_http_methods(["GET", "POST"])
def import_list(request):
    _require_importer(request.user)
    form = ImportUploadForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                started = complaint_import_start(actor=request.user, tenant=request.user.tenant,
                                                 upload=form.cleaned_data["file"])
            except DomainError as error:
                add_to_form(form, error)
                status = status_for(error)
            else:
                return redirect("web:import_detail", pk=started.pk)
    context = {"form": form, "imports": selectors.import_list_for_user(user=request.user),
               "max_megabytes": settings.INTAKE_MAX_UPLOAD_BYTES // (1024 * 1024)}
    return render(request, "web/intake/list.html", context, status=status)


@member_required
def import_detail(request, pk: int):
    _require_importer(request.user)
    complaint_import = selectors.import_get_for_user(user=request.user, pk=pk)
    template = "web/intake/_progress.html" if request.htmx else "web/intake/detail.html"
    return render(request, template, {"complaint_import": complaint_import})


@member_required
def import_errors(request, pk: int):
    _require_importer(request.user)
    complaint_import = selectors.import_get_for_user(user=request.user, pk=pk)
    if not complaint_import.error_report:
        raise NotFound("This import has no error report: none of its rows was refused.")
    response = FileResponse(complaint_import.error_report.open("rb"), as_attachment=True,
                            filename=f"import-{complaint_import.pk}-bad-rows.csv", content_type="text/csv")
    response["X-Content-Type-Options"] = "nosniff"
    return response
