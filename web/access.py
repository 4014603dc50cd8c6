"""Who may open which browser page. Pages check membership and role; every write is still
decided by the services."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required

from core.errors import Forbidden

AUDIT_FORBIDDEN_MESSAGE = ("The audit log is open to auditors, supervisors and administrators only. "
                           "Ask one of them if you need to know who did what.")


def member_required(view):
    """Logged in and attached to a tenant (a superuser without one uses the admin site)."""

    @login_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.user.tenant_id is None:
            raise Forbidden("Your account is not attached to any tenant, so it has no cases. "
                            "An administrator can attach it to one in the admin site.")
        return view(request, *args, **kwargs)

    return wrapped


def require_audit_access(user) -> None:
    if not user.can_see_audit:
        raise Forbidden(AUDIT_FORBIDDEN_MESSAGE)
