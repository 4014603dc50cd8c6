"""One exception handler for the REST API: domain errors map to stable codes and statuses."""

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import DomainError


def exception_handler(exc, context):
    if isinstance(exc, DomainError):
        return Response(exc.as_dict(), status=exc.http_status)
    response = drf_exception_handler(exc, context)
    if response is not None and response.status_code == status.HTTP_400_BAD_REQUEST:
        data = response.data
        response.data = {"code": "invalid", "detail": "The request is invalid; see fields.",
                         "fields": data if isinstance(data, dict) else {"non_field_errors": data}}
    elif response is not None and isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"code": getattr(response.data["detail"], "code", "error"),
                         "detail": str(response.data["detail"])}
    return response
