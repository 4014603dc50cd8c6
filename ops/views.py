"""Operator-only views: Prometheus metrics."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django_prometheus.exports import ExportToDjangoView


def is_operator(request) -> bool:
    """Staff users and the admin role (session), or a scraper presenting ARBITER_METRICS_TOKEN as
    `Authorization: Bearer <token>`."""
    token = settings.ARBITER_METRICS_TOKEN
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), token):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated
                and (user.is_staff or user.is_superuser or getattr(user, "role", "") == "admin"))


@never_cache
def metrics(request):
    if not is_operator(request):
        return HttpResponse("Metrics are for operators: log in as staff or an admin, or send "
                            "`Authorization: Bearer <ARBITER_METRICS_TOKEN>`.\n",
                            status=403, content_type="text/plain")
    return ExportToDjangoView(request)
