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
each change in retry_on_deadlock itself.

The same holds for the routes config/urls.py mounts outside web/urls.py: logging in and out
(`writes_retried` on those two routes, each attempt in one transaction) and the admin site
(`admin_urls_retried`: every admin view whole, each attempt in one transaction, except each
model's change list, whose bulk actions change one selected row per service call and retry each
call on its own, as the review inbox does — cases.admin.run_service_action)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from importlib import import_module

from django.conf import settings
from django.db import transaction
from django.urls import URLResolver

from core.db import is_lock_conflict, retry_on_deadlock

SessionStore = import_module(settings.SESSION_ENGINE).SessionStore  # as SessionMiddleware builds it
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def retries_each_change(view: Callable) -> Callable:
    """Mark a view that retries each of its changes itself; `writes_retried` leaves it as it is."""
    view.retries_each_change = True
    return view


def write_retried_on_deadlock(view: Callable, *, atomic: bool = False) -> Callable:
    """`view`, run under retry_on_deadlock for unsafe methods. `atomic`: each attempt in one
    transaction of its own, for a view that writes several times without one (logging in saves the
    session, the last login and the login log): the aborted attempt leaves none of them."""
    if getattr(view, "retries_each_change", False) or getattr(view, "retried_on_deadlock", False):
        return view

    @functools.wraps(view)
    def attempt(request, *args, **kwargs):
        for _name, uploads in request.FILES.lists():
            for upload in uploads:
                upload.seek(0)  # a second attempt reads an uploaded file from its start again
        queued = _queued_messages(request)
        already = len(queued)
        session, user = getattr(request, "session", None), getattr(request, "user", None)
        session_key = session.session_key if session is not None else None
        try:
            if atomic:
                with transaction.atomic():
                    return view(request, *args, **kwargs)
            return view(request, *args, **kwargs)
        except Exception as exc:
            if is_lock_conflict(exc):
                # What an attempt aborted by the database told the person (an admin page's "added",
                # a new API key's secret) is about rows that were rolled back: only the attempt that
                # commits speaks. And the session and the user are as the database still has them
                # (a login cycles the session key; the aborted attempt's new row is gone).
                del queued[already:]
                if session is not None:
                    request.session = SessionStore(session_key)
                if user is not None:
                    request.user = user
            raise

    retried = retry_on_deadlock(attempt)

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method in SAFE_METHODS:
            return view(request, *args, **kwargs)
        return retried(request, *args, **kwargs)

    wrapper.retried_on_deadlock = True
    return wrapper


def _queued_messages(request) -> list:
    """The messages this request has added so far (django.contrib.messages keeps them in its
    storage's queue until the response is stored), or a throwaway list without that middleware."""
    queued = getattr(getattr(request, "_messages", None), "_queued_messages", None)
    return queued if isinstance(queued, list) else []


def writes_retried(patterns: Iterable, *, atomic: bool = False) -> list:
    """Every URL pattern of `patterns` with its view wrapped by write_retried_on_deadlock."""
    wrapped = []
    for pattern in patterns:
        pattern.callback = write_retried_on_deadlock(pattern.callback, atomic=atomic)
        wrapped.append(pattern)
    return wrapped


def admin_urls_retried(urls: tuple) -> tuple:
    """`admin.site.urls` (patterns, app name, namespace) with every view, at any depth, wrapped by
    write_retried_on_deadlock, each attempt one transaction (the admin's change and delete pages
    are already; its login, logout and password pages are not), except the model change lists:
    marked `retries_each_change`, as their bulk actions retry each row's change themselves."""
    patterns, app_name, namespace = urls
    _wrap_admin_patterns(patterns)
    return patterns, app_name, namespace


def _wrap_admin_patterns(patterns: Iterable) -> None:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            _wrap_admin_patterns(pattern.url_patterns)
        elif (pattern.name or "").endswith("_changelist"):
            pattern.callback = retries_each_change(pattern.callback)
        else:
            pattern.callback = write_retried_on_deadlock(pattern.callback, atomic=True)
