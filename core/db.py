"""Transparent, bounded retry of a transaction PostgreSQL aborted for a lock conflict.

PostgreSQL breaks a deadlock (SQLSTATE 40P01) by aborting one of the transactions, and aborts a
serializable transaction that cannot be ordered (40001). Either way the aborted transaction changed
nothing, so running it again is safe — if it was the whole transaction. `retry_on_deadlock` retries
only there: when it is entered outside any transaction (Django's autocommit). Inside a caller's
transaction it does nothing (the caller's transaction is what was aborted; only its owner can run it
again), and inside another retry_on_deadlock it does nothing (so nested wrappers do not multiply the
attempts). After the last attempt it raises Busy (503, Retry-After), never the database error.

The lock order that keeps deadlocks rare in the first place is in docs/adr/0022."""

from __future__ import annotations

import contextvars
import functools
import logging
import random
import time

from django.db import transaction

from core.errors import Busy

logger = logging.getLogger(__name__)

RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
DEFAULT_ATTEMPTS = 3

_retrying = contextvars.ContextVar("arbiter_retry_on_deadlock", default=False)


def is_lock_conflict(exc: BaseException) -> bool:
    """True for a deadlock or serialization failure, as psycopg raises it or as Django wraps it
    (django.db.OperationalError whose cause carries the SQLSTATE)."""
    seen = 0
    while exc is not None and seen < 5:
        if getattr(exc, "sqlstate", None) in RETRYABLE_SQLSTATES:
            return True
        exc, seen = exc.__cause__, seen + 1
    return False


def retry_on_deadlock(func=None, *, attempts: int = DEFAULT_ATTEMPTS, pause: float = 0.05):
    """Decorator: run `func` again (up to `attempts` in all) when it fails on a lock conflict,
    after a short random pause that grows with each attempt; then Busy."""
    if func is None:
        return functools.partial(retry_on_deadlock, attempts=attempts, pause=pause)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if _retrying.get() or transaction.get_connection().in_atomic_block:
            return func(*args, **kwargs)
        token = _retrying.set(True)
        try:
            return _run_with_retries(func, args, kwargs, attempts, pause)
        finally:
            _retrying.reset(token)

    return wrapper


def _run_with_retries(func, args, kwargs, attempts: int, pause: float):
    for attempt in range(1, attempts + 1):
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # psycopg's own error, or Django's wrapper of it
            if not is_lock_conflict(exc):
                raise
            logger.warning("%s aborted by the database for a lock conflict (attempt %s of %s)",
                           getattr(func, "__qualname__", func), attempt, attempts)
            if attempt == attempts:
                raise Busy("The database is busy with conflicting changes; nothing was changed. Retry shortly.",
                           retry_after=1) from exc
            time.sleep(random.uniform(0, pause * attempt))
    raise AssertionError("unreachable")
