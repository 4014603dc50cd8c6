"""Outages of the database or the broker: answered, logged and survived as such.

- `outage_kind(exc)`: "database", "broker" or "service" (another connection) when the exception means that service cannot be
  reached (connection refused, closed, timed out), None for anything else. A query that is simply
  wrong (ProgrammingError, IntegrityError) is never an outage.
- `OutageMiddleware` and `outage_response`: a request that meets an outage gets 503 with
  Retry-After (JSON in the API's error shape under /api/, a short page that reloads itself in the
  browser), not a 500 — the request changed nothing, and retrying later is the right advice.
- `OutageLog`: a loop that polls (the worker's heartbeat thread, its duties, a request path) logs
  ONE warning when an outage starts and one line with the count of failures when it ends, instead
  of a traceback per attempt.
- `BrokerConnectionLogFilter`: the same for Celery's own consumer, which logs an ERROR per attempt
  to reconnect to the broker."""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import InterfaceError
from django.db import OperationalError as DatabaseOperationalError
from django.http import HttpResponse, JsonResponse
from django.template import loader

logger = logging.getLogger("arbiter.outages")


def outage_kind(exc: BaseException | None) -> str | None:
    """Which service an exception says is unreachable, or None when it is not an outage."""
    if exc is None:
        return None
    if isinstance(exc, (DatabaseOperationalError, InterfaceError)):
        return "database"
    from kombu.exceptions import OperationalError as BrokerOperationalError

    if isinstance(exc, BrokerOperationalError):
        return "broker"
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return "service"
    return None


class OutageLog:
    """One warning when `what` starts failing, one line when it works again, a count in between.

    Thread-safe; one instance per loop (or per service, for requests)."""

    def __init__(self, what: str):
        self.what = what
        self.failures = 0
        self.since = 0.0
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self.failures += 1
            first = self.failures == 1
            if first:
                self.since = time.monotonic()
        if first:
            logger.warning("%s failing: %s: %s (one line per outage; it is retried and its end is logged)",
                           self.what, type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")

    def succeeded(self) -> None:
        with self._lock:
            failures, self.failures = self.failures, 0
            lasted = time.monotonic() - self.since
        if failures:
            logger.warning("%s works again after %s failure(s) over %.0f s", self.what, failures, lasted)


class OutageLogFilter(logging.Filter):
    """For the worker's task-failure logger (celery.app.trace): a periodic task that fails because
    the database or broker is down is one warning per outage (per task name), not an ERROR with a
    traceback every time beat sends it. Any other failure passes through untouched."""

    def __init__(self):
        super().__init__()
        self.outages: dict[str, OutageLog] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if outage_kind(exc) is None:
            return True
        data = getattr(record, "data", None)
        task = (data.get("name") if isinstance(data, dict) else None) or "?"
        with self._lock:
            log = self.outages.setdefault(task, OutageLog(f"task {task}"))
        log.failed(exc)
        return False


# What Celery's consumer (celery.worker.consumer.consumer) logs when the broker connection drops
# ("consumer: Connection to broker lost. Trying to re-establish the connection...") and on each
# failed reconnect ("consumer: Cannot connect to redis://…: Error 111 … Trying again in 4.00
# seconds... (2/100)"): an ERROR every few seconds for as long as the broker is down.
CONSUMER_CONNECTION_LINES = ("consumer: Connection to broker lost", "consumer: Cannot connect to")


class BrokerConnectionLogFilter(logging.Filter):
    """For the worker's consumer logger: the broker connection's loss and every failed reconnect
    become one warning when the outage starts; `connected()` (called when the consumer has its
    connection again, by the worker's consumer step in config/celery.py) logs one line with the count
    of failed attempts and how long it lasted. Anything else the consumer logs passes through.
    `lines`: the beginnings of the lines it stands for (beat's are "beat: Connection error")."""

    def __init__(self, what: str = "worker: the broker connection", *,
                 lines: tuple[str, ...] = CONSUMER_CONNECTION_LINES):
        super().__init__()
        self.outage = OutageLog(what)
        self.lines = lines

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str) or not record.getMessage().startswith(self.lines):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        exc = next((arg for arg in args if isinstance(arg, BaseException)), None)
        self.outage.failed(exc or ConnectionError(record.getMessage().splitlines()[0]))
        return False

    def connected(self) -> None:
        self.outage.succeeded()


REQUEST_OUTAGES = {kind: OutageLog(f"requests: the {kind}") for kind in ("database", "broker", "service")}
WHAT = {"database": "the database", "broker": "the task broker", "service": "a service Arbiter depends on"}


def outage_response(request, kind: str) -> HttpResponse:
    """503 with Retry-After: JSON `{"code": "unavailable", ...}` under /api/, a page otherwise."""
    retry_after = settings.ARBITER_OUTAGE_RETRY_AFTER_SECONDS
    if request.path.startswith("/api/"):
        response = JsonResponse({"code": "unavailable",
                                 "detail": f"{WHAT[kind].capitalize()} is unreachable right now; nothing was changed. "
                                           f"Retry in {retry_after} seconds."}, status=503)
    else:
        page = loader.render_to_string("503.html", {"what": WHAT[kind], "retry_after": retry_after})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(retry_after)
    response["Cache-Control"] = "no-store"
    # OutageLog says it once per outage; Django's request logger would add an ERROR per request.
    response._has_been_logged = True
    return response


class OutageMiddleware:
    """Last in MIDDLEWARE, so its process_exception sees a view's exception first. Exceptions
    raised by other middleware (a session saved to an unreachable database) reach core.api's
    handler500, which answers the same way."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code < 500:
            for log in REQUEST_OUTAGES.values():
                if log.failures:
                    log.succeeded()
        return response

    def process_exception(self, request, exception):
        kind = outage_kind(exception)
        if kind is None:
            return None
        REQUEST_OUTAGES[kind].failed(exception)
        return outage_response(request, kind)
