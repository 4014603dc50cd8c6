"""Login lockout (django-axes) written to the audit ledger.

django-axes sends `user_locked_out` when a client reaches AXES_FAILURE_LIMIT failed logins (the
login form, the admin's, and HTTP Basic on the API alike: all go through
django.contrib.auth.authenticate). It sends it again for each further failed attempt during the
lockout; the audit records the moment a lockout begins (the attempt that reached the limit),
so a password-guessing burst is one event, not thousands."""

from __future__ import annotations

import logging

from django.db import transaction

logger = logging.getLogger("arbiter.security")

LOCKOUT_ACTION = "accounts.login.locked_out"


def on_user_locked_out(sender, request, username, ip_address, **kwargs) -> None:
    from django.conf import settings

    from accounts.models import User
    from audit.services import audit_record
    from ops import metrics

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
