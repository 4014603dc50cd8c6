"""One exception handler for the REST API: every error body is {code, detail, fields?}.

Domain errors keep their stable code and status; DRF's validation errors become `invalid` with
per-field messages; DRF's other errors (parse error, authentication, throttling, 404, 405 ...)
keep their own status and code."""

from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import DomainError


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        return Response(exc.as_dict(), status=exc.http_status)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError):
        data = response.data
        response.data = {"code": "invalid", "detail": "The request is invalid; see fields.",
                         "fields": data if isinstance(data, dict) else {"non_field_errors": data}}
    elif isinstance(response.data, dict) and "detail" in response.data:
        detail = response.data["detail"]
        response.data = {"code": getattr(detail, "code", None) or getattr(exc, "default_code", "error"),
                         "detail": str(detail)}
    return response
