"""Login lockout (django-axes) written to the audit ledger.

django-axes sends `user_locked_out` when a client reaches AXES_FAILURE_LIMIT failed logins (the
login form, the admin's, and HTTP Basic on the API alike: all go through
django.contrib.auth.authenticate). It sends it again for each further failed attempt during the
lockout; the audit records the moment a lockout begins (the attempt that reached the limit),
so a password-guessing burst is one event, not thousands."""

from __future__ import annotations

import logging

from django.db import transaction
from django.http import HttpResponse, JsonResponse

from accounts.models import User
from audit.services import audit_record
from ops import metrics

logger = logging.getLogger("arbiter.security")

LOCKOUT_ACTION = "accounts.login.locked_out"


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: 429 with Retry-After; the REST API's error body ({code, detail}) under
    /api/, a plain sentence elsewhere. Nothing says whether the password was right."""
    from django.conf import settings

    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    detail = (f"Too many failed logins for this account from your address: logins are refused for "
              f"{minutes} minutes. Try again later, or ask an administrator.")
    if request.path.startswith("/api/"):
        response = JsonResponse({"code": "locked_out", "detail": detail}, status=429)
    else:
        response = HttpResponse(detail + "\n", status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response


def on_user_locked_out(sender, request, username, ip_address, **kwargs) -> None:
    from django.conf import settings

    # HTTP Basic: DRF authenticates with its own Request wrapping Django's, and axes flags the
    # wrapper; AxesMiddleware looks at Django's request. Flag that one too, so the API answers the
    # lockout (429) like the login page.
    inner = getattr(request, "_request", None)
    if inner is not None:
        inner.axes_locked_out = True
        inner.axes_credentials = getattr(request, "axes_credentials", None)


    failures = getattr(request, "axes_failures_since_start", None)
    if failures is not None and failures > settings.AXES_FAILURE_LIMIT:
        return  # still locked out: the lockout was recorded when it began
    user = User.objects.filter(username=username).only("pk", "tenant_id").first() if username else None
    path = getattr(request, "axes_path_info", "") or getattr(request, "path", "")
    with transaction.atomic():
        audit_record(tenant_id=user.tenant_id if user else None, actor_type="system", actor_id="system:axes",
                     action=LOCKOUT_ACTION, target_type="user", target_id=user.pk if user else "",
                     decision="locked_out",
                     payload={"username": (username or "")[:150], "ip_address": ip_address or "",
                              "path": path[:200], "failures": failures,
                              "cool_off_seconds": int(settings.AXES_COOLOFF_TIME.total_seconds())})
    metrics.login_locked_out()
    logger.warning("login locked out", extra={"username": username, "ip_address": ip_address})
