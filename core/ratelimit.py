"""Rate limits shared by every process and machine: one counter per (scope, who, window) in
Django's default cache — Redis, or the database's cache table (ops.cache) — never in a process.

A limit "N/period" is a fixed window: the period is cut into windows aligned on the epoch, and a
counter per window is incremented atomically (Redis INCR; a locked row update on the database).
The increment that takes the counter past N is refused, in whichever process it happens, so all
processes together admit at most N per window. A window that starts as the previous one ends may
admit up to N again at once (the known cost of fixed windows, ADR 0016), in exchange for one
atomic operation per request and a Reset that is the same for every process.

When the cache cannot be reached, a limited request is answered 503 with Retry-After (an outage),
not let through unlimited and not a 500."""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass

from django.core.cache import cache
from django.db import DatabaseError
from redis.exceptions import RedisError
from rest_framework import status
from rest_framework.exceptions import APIException

from core.outages import OutageLog

logger = logging.getLogger("arbiter.ratelimit")
# An unreachable store is said once when it starts failing and once, with the count, when it works again.
STORE_OUTAGE = OutageLog("rate limits: the cache")

PERIOD_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# A window's counter outlives the window a little, so it never expires while it is still counted.
_EXPIRY_MARGIN_SECONDS = 60


class RateLimitUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "rate_limit_unavailable"
    default_detail = ("The rate-limit store (the cache) cannot be reached, so this limited request is not "
                      "accepted now. Retry in a few seconds.")


@dataclass(frozen=True)
class RateDecision:
    limit: int
    count: int  # requests counted in the current window, this one included when it was a hit
    reset_seconds: int  # until the current window ends

    @property
    def remaining(self) -> int:
        return max(self.limit - self.count, 0)

    @property
    def is_over(self) -> bool:
        """For a hit: this request went past the limit."""
        return self.count > self.limit

    @property
    def is_exhausted(self) -> bool:
        """For a peek: the next hit would go past the limit."""
        return self.count >= self.limit


def parse_rate(rate: str) -> tuple[int, int]:
    """"30/minute" -> (30, 60). Settings are checked at start-up; this raises ValueError otherwise."""
    count, _, period = rate.partition("/")
    if not count.isdigit() or not period or period[0] not in PERIOD_SECONDS:
        raise ValueError(f"{rate!r} is not a rate like 30/minute.")
    return int(count), PERIOD_SECONDS[period[0]]


def _window(duration: int, now: float) -> tuple[int, int]:
    start = int(now // duration) * duration
    return start, max(math.ceil(start + duration - now), 1)


def _key(scope: str, ident: str, window_start: int) -> str:
    # Hashed: an ident may be long or hold characters some caches refuse in keys.
    digest = hashlib.sha256(str(ident).encode()).hexdigest()[:32]
    return f"ratelimit:{scope}:{digest}:{window_start}"


def rate_hit(*, scope: str, ident: str, rate: str, now: float | None = None) -> RateDecision:
    """Count one request of `ident` against `rate`; `is_over` says whether it must be refused."""
    limit, duration = parse_rate(rate)
    start, reset = _window(duration, time.time() if now is None else now)
    key = _key(scope, ident, start)
    try:
        cache.add(key, 0, timeout=duration + _EXPIRY_MARGIN_SECONDS)
        count = cache.incr(key)
    except (DatabaseError, RedisError, OSError, ValueError) as exc:
        # ValueError: the counter vanished between add and incr (evicted); treat it as an outage
        # rather than guess a count.
        STORE_OUTAGE.failed(exc)
        raise RateLimitUnavailable() from exc
    STORE_OUTAGE.succeeded()
    return RateDecision(limit=limit, count=count, reset_seconds=reset)


def rate_peek(*, scope: str, ident: str, rate: str, now: float | None = None) -> RateDecision:
    """The current window's count for `ident`, without counting anything."""
    limit, duration = parse_rate(rate)
    start, reset = _window(duration, time.time() if now is None else now)
    try:
        count = cache.get(_key(scope, ident, start), 0)
    except (DatabaseError, RedisError, OSError) as exc:
        STORE_OUTAGE.failed(exc)
        raise RateLimitUnavailable() from exc
    STORE_OUTAGE.succeeded()
    return RateDecision(limit=limit, count=count, reset_seconds=reset)


def set_rate_limit_headers(response, decision: RateDecision) -> None:
    """RateLimit-Limit / -Remaining / -Reset (seconds until the window ends) on any response; a 429
    also says Retry-After (DRF sets it from the Throttled exception; set here if it did not)."""
    response["RateLimit-Limit"] = str(decision.limit)
    response["RateLimit-Remaining"] = str(decision.remaining)
    response["RateLimit-Reset"] = str(decision.reset_seconds)
    if response.status_code == status.HTTP_429_TOO_MANY_REQUESTS and not response.has_header("Retry-After"):
        response["Retry-After"] = str(decision.reset_seconds)
