"""Health probes for load balancers and orchestrators.

/healthz: the process is up and serving (no dependency is touched; never fails while it can answer).
/readyz: this instance can do its work: every registered readiness check passes. 200 with the
results when all pass, 503 naming the failing ones otherwise. Each check is bounded in time.
A check registered with `degrades=True` (beat's heartbeat: the hourly jobs wait, but requests and
runs are served) never makes it 503: when it fails, /readyz answers 200 with status `degraded`
and the reason, so a load balancer keeps the instance while an operator sees what is missing.

Checks are pluggable: `register_readiness_check(name, function)` (a function returning None when
ready, or raising / returning a message when not), typically from an app's AppConfig.ready(). The
database and the broker are registered here. The worker heartbeat and the outbox lag belong to the
apps that own them: they register themselves under the names READINESS_WORKER_HEARTBEAT and
READINESS_OUTBOX_LAG. ARBITER_READYZ_CHECKS limits which registered checks run (default: all)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.http import JsonResponse

from config.celery import app

# Hook names for the checks other apps provide (the outbox app: its lag and the worker heartbeat).
READINESS_WORKER_HEARTBEAT = "worker_heartbeat"
READINESS_OUTBOX_LAG = "outbox_lag"
READINESS_BEAT_HEARTBEAT = "beat_heartbeat"

ReadinessCheck = Callable[[], "str | None"]
_CHECKS: dict[str, ReadinessCheck] = {}
_DEGRADING: set[str] = set()


def register_readiness_check(name: str, check: ReadinessCheck, *, degrades: bool = False) -> None:
    """Add (or replace) a readiness check. It returns None when ready, a short reason when not,
    or raises; it must answer within ARBITER_READYZ_TIMEOUT_SECONDS. With `degrades`, its failure
    makes /readyz `degraded` (still 200) instead of 503."""
    _CHECKS[name] = check
    (_DEGRADING.add if degrades else _DEGRADING.discard)(name)


def registered_checks() -> dict[str, ReadinessCheck]:
    wanted = settings.ARBITER_READYZ_CHECKS
    return {name: check for name, check in _CHECKS.items() if not wanted or name in wanted}


def check_database() -> str | None:
    from django.db import connections

    for alias in connections:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    return None


def check_broker() -> str | None:
    """Open (and close) a connection to the Celery broker."""
    timeout = settings.ARBITER_READYZ_TIMEOUT_SECONDS
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
    return None


register_readiness_check("database", check_database)
register_readiness_check("broker", check_broker)


def _bounded(check: ReadinessCheck, timeout: float) -> str | None:
    """Run a check in a thread of its own and give up after `timeout` seconds: a database or broker
    that does not answer (a dropped packet, not a refused connection) must not hang the probe. The
    thread closes the database connections it opened."""
    from django.db import connections

    outcome: dict[str, str | None] = {}

    def target() -> None:
        try:
            outcome["problem"] = check()
        except Exception as exc:  # a probe reports; it never raises
            outcome["problem"] = f"{type(exc).__name__}: {exc}"
        finally:
            connections.close_all()

    worker = threading.Thread(target=target, name="readyz-check", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return f"no answer within {timeout}s"
    return outcome.get("problem")


def run_checks() -> tuple[str, dict[str, dict]]:
    """("ready" | "degraded" | "not ready", each check's result)."""
    results: dict[str, dict] = {}
    timeout = settings.ARBITER_READYZ_TIMEOUT_SECONDS
    for name, check in registered_checks().items():
        started = time.monotonic()
        problem = _bounded(check, timeout)
        results[name] = {"ok": not problem, "ms": int((time.monotonic() - started) * 1000)}
        if problem:
            results[name]["error"] = str(problem)[:300]
            if name in _DEGRADING:
                results[name]["degrades_only"] = True
    missing = [name for name in settings.ARBITER_READYZ_CHECKS if name not in _CHECKS]
    for name in missing:
        results[name] = {"ok": False, "ms": 0, "error": "no such check is registered"}
    if not all(result["ok"] or result.get("degrades_only") for result in results.values()):
        return "not ready", results
    return ("ready" if all(result["ok"] for result in results.values()) else "degraded"), results


def healthz_response() -> JsonResponse:
    return JsonResponse({"status": "ok"})


def readyz_response() -> JsonResponse:
    status, results = run_checks()
    response = JsonResponse({"status": status, "checks": results}, status=503 if status == "not ready" else 200)
    response["Cache-Control"] = "no-store"
    if status == "not ready":  # a 503 says when to ask again, as every outage answer does (core.outages)
        response["Retry-After"] = str(settings.ARBITER_OUTAGE_RETRY_AFTER_SECONDS)
    return response
