"""Request-scoped operations middleware: the request id and the log context, and the health
probes answered before anything else.

RequestContextMiddleware (first in MIDDLEWARE) takes a well-formed incoming X-Request-ID (a
proxy's) or makes one, binds it to the log context with the client's address, the user, tenant and the case or run the
URL names, writes one log line per request, and sets X-Request-ID on every response — pages, the
REST API, refusals, lockouts and errors alike (the API's error bodies quote it).

HealthProbeMiddleware answers /healthz and /readyz before host validation, the HTTPS redirect,
sessions and authentication: a load balancer probes an instance by its address over plain HTTP,
and a probe must say whether *this process* is up, not whether the request was acceptable."""

from __future__ import annotations

import re
import time
import uuid

import structlog
from django.db import InterfaceError, OperationalError

from core.client_address import client_address
from ops import health
from ops.logging import bind, get_logger

logger = get_logger("arbiter.request")

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID_OK = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
# URL names whose `pk` is a run id (web/urls.py and the runs API).
_RUN_URL_NAMES = re.compile(r"(^|[_:])run")


def request_id_from(request) -> str:
    incoming = request.META.get("HTTP_X_REQUEST_ID", "")
    return incoming if _REQUEST_ID_OK.match(incoming) else uuid.uuid4().hex


def _user_ids(request) -> dict:
    try:
        user = getattr(request, "user", None)
        if user is None or not getattr(user, "is_authenticated", False):
            return {}
    except (OperationalError, InterfaceError):
        # The user's session could not be loaded: the database is down. Logging context is not
        # worth failing for; the view meets the same outage and answers 503 (core.outages).
        return {}
    return {"user_id": user.pk, "tenant_id": getattr(user, "tenant_id", None)}


class RequestContextMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request_id_from(request)
        request.request_id = request_id
        # Whatever this request binds (here, in process_view, in a view) is undone at its end, so
        # nothing leaks into the next request served by this thread.
        outer = structlog.contextvars.get_contextvars()
        # The address the throttles and the login lockout use (trusted proxies only), not REMOTE_ADDR.
        bind(request_id=request_id, client_ip=client_address(request))
        started = time.monotonic()
        try:
            response = self.get_response(request)
            # The user is known only now for HTTP Basic (DRF authenticates in the view); it sets
            # the underlying request's user too.
            bind(**_user_ids(request))
            logger.info("request.finished", method=request.method, path=request.path,
                        status=response.status_code, duration_ms=int((time.monotonic() - started) * 1000))
            response[REQUEST_ID_HEADER] = request_id
            return response
        finally:
            structlog.contextvars.clear_contextvars()
            structlog.contextvars.bind_contextvars(**outer)

    def process_view(self, request, view_func, view_args, view_kwargs):
        """Bind the user, tenant and the case or run the URL names, for every line the view logs."""
        ids = _user_ids(request)
        if "reference" in view_kwargs:
            ids["case_ref"] = view_kwargs["reference"]
        match = getattr(request, "resolver_match", None)
        if match is not None and "pk" in view_kwargs and _RUN_URL_NAMES.search(match.url_name or ""):
            ids["run_id"] = view_kwargs["pk"]
        if "sequence" in view_kwargs and "run_id" in ids:
            ids["step"] = view_kwargs["sequence"]
        bind(**ids)  # undone at the end of __call__
        return None


class HealthProbeMiddleware:
    PATHS = {"/healthz", "/healthz/", "/readyz", "/readyz/"}

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info in self.PATHS and request.method in ("GET", "HEAD"):

            if request.path_info.startswith("/healthz"):
                return health.healthz_response()
            return health.readyz_response()
        return self.get_response(request)
