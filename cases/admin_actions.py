"""How an admin action calls a service for each selected row (the case, notice, run and thread
admins all use it)."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import admin, messages

from core.db import retry_on_deadlock
from core.errors import DomainError


def run_service_action(modeladmin: admin.ModelAdmin, request, queryset, *, verb: str,
                       call: Callable[[object, str], object]) -> None:
    """Call `call(obj, reason)` for each selected row, each in its own service transaction: one
    refusal does not undo the others. A DomainError becomes an ERROR message that says why. A call
    aborted by a deadlock runs again on its own (the change list is not retried whole: the rows
    already changed would be refused the second time); Busy once its retries are spent."""
    reason = (request.POST.get("reason") or "").strip()
    done = []
    for obj in queryset:
        try:
            retry_on_deadlock(call)(obj, reason)
        except DomainError as error:
            details = "; ".join(f"{field}: {' '.join(problems)}" for field, problems in error.fields.items())
            modeladmin.message_user(request, f"{obj}: {error.message}" + (f" ({details})" if details else ""),
                                    messages.ERROR)
        else:
            done.append(str(obj))
    if done:
        modeladmin.message_user(request, f"{verb}: {', '.join(done)}.", messages.SUCCESS)
