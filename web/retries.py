"""Browser writes run again after a deadlock or serialization failure, as the API's do.

Every route of the browser UI is wrapped once, in web/urls.py (`writes_retried`): a POST (or any
unsafe method) runs its view under core.db.retry_on_deadlock, so when PostgreSQL aborts the
view's transaction for a lock conflict the whole view runs again (bounded; then Busy, a 503 page
saying nothing was changed). That is safe because a browser action validates its form and calls
exactly one service, whose transaction is the whole change: the aborted attempt left nothing
behind, and the second attempt answers as if the first had never been. Safe methods are never
retried (they write nothing).

A view that makes several independent changes in one request (the review inbox deciding a group
of items, each in its own transaction) must not run again as a whole: the items the first attempt
decided would be refused the second time. Such a view is marked `@retries_each_change` and wraps
each change in retry_on_deadlock itself."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from core.db import retry_on_deadlock

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def retries_each_change(view: Callable) -> Callable:
    """Mark a view that retries each of its changes itself; `writes_retried` leaves it as it is."""
    view.retries_each_change = True
    return view


def write_retried_on_deadlock(view: Callable) -> Callable:
    """`view`, run under retry_on_deadlock for unsafe methods."""
    if getattr(view, "retries_each_change", False) or getattr(view, "retried_on_deadlock", False):
        return view

    @functools.wraps(view)
    def attempt(request, *args, **kwargs):
        for _name, uploads in request.FILES.lists():
            for upload in uploads:
                upload.seek(0)  # a second attempt reads an uploaded file from its start again
        return view(request, *args, **kwargs)

    retried = retry_on_deadlock(attempt)

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method in SAFE_METHODS:
            return view(request, *args, **kwargs)
        return retried(request, *args, **kwargs)

    wrapper.retried_on_deadlock = True
    return wrapper


def writes_retried(patterns: Iterable) -> list:
    """Every URL pattern of `patterns` with its view wrapped by write_retried_on_deadlock."""
    wrapped = []
    for pattern in patterns:
        pattern.callback = write_retried_on_deadlock(pattern.callback)
        wrapped.append(pattern)
    return wrapped
