"""The one place where the browser UI turns domain errors into what a person sees.

- `status_for` / `title_for`: the HTTP status and a short heading for each stable error code
  (not_allowed / stale / conflict -> 409, forbidden -> 403, not_found -> 404, invalid -> 400).
- `add_to_form`: an Invalid error's field messages land on the form fields they name.
- `DomainErrorMiddleware`: any DomainError a view lets escape (another tenant's case, a role that
  may not see a page) becomes an error page with the right status, never a 500. For an htmx
  request it becomes a fragment swapped into the page's <main>.

Views that handle an error in place (an action on the case page) use the same helpers, so the
mapping lives here only. The REST API has its own single mapping in core.api."""

from __future__ import annotations

from django.forms import Form
from django.shortcuts import render

from core.errors import DomainError

TITLES = {
    "not_allowed": "That is not possible right now",
    "stale": "This is out of date",
    "conflict": "Someone else changed this",
    "forbidden": "You are not permitted to do this",
    "not_found": "Not found",
    "invalid": "Please correct the highlighted fields",
    "busy": "Arbiter is busy",
}

# What a person can do next, per code (shown under the message on error pages).
NEXT_STEPS = {
    "not_allowed": "Check the current state of the item and choose one of the actions it offers now.",
    "stale": "Reload the page, review what changed, and decide again.",
    "conflict": "Reload the page to see the latest version, then try again.",
    "forbidden": "Ask a supervisor or an administrator if you think you should be able to do this.",
    "not_found": "Check the address, or go back to the case queue.",
    "invalid": "Correct the fields marked below and submit again.",
    "busy": "Wait a moment and submit again.",
}


def status_for(error: DomainError) -> int:
    return error.http_status


def title_for(error: DomainError) -> str:
    return TITLES.get(error.code, "The action was not carried out")


def error_context(error: DomainError) -> dict:
    return {"code": error.code, "title": title_for(error), "message": error.message,
            "next_step": NEXT_STEPS.get(error.code, ""), "fields": error.fields}


def add_to_form(form: Form, error: DomainError, *, field_map: dict[str, str] | None = None) -> None:
    """Put an Invalid error's field messages on the form's fields (or on the form as a whole when
    the service names a field the form does not have). Other errors become a form-wide message."""
    field_map = field_map or {}
    if not error.fields:
        form.add_error(None, error.message)
        return
    for name, messages in error.fields.items():
        target = field_map.get(name, name)
        for message in messages:
            form.add_error(target if target in form.fields else None, message)


class DomainErrorMiddleware:
    """Render a DomainError that escaped a browser view as an error page with its status."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DomainError):
            return None
        context = {"error": error_context(exception)}
        if getattr(request, "htmx", False) and not request.htmx.history_restore_request:
            response = render(request, "errors/_domain_error.html", context, status=status_for(exception))
            # Replace the page's main region: the element the request targeted may no longer exist.
            response["HX-Retarget"] = "#main"
            response["HX-Reswap"] = "innerHTML"
        else:
            response = render(request, "errors/domain_error.html", context, status=status_for(exception))
        if exception.context.get("retry_after"):  # Busy: the database kept refusing for lock conflicts
            response["Retry-After"] = str(exception.context["retry_after"])
        return response
