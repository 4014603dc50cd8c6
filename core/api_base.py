"""The base classes every REST API view derives from (cases, runs, conversations, integrations).

They add, in one place, what an integration relies on:
- unknown query parameters are refused (400 naming them);
- every unsafe request honours `Idempotency-Key` (integrations.idempotency);
- lists page with a cursor, `page_size` up to a maximum, a validated `ordering` and `updated_since`;
- `ETag` / `If-Match` helpers for objects with a version (cases, proposals, notices);
- per-credential throttles for run starts and message posts, counted in the shared cache
  (core.ratelimit), with RateLimit-* headers on the responses they count.

They live in core, under every app, so each app's api/ builds on them by a downward import. The one
piece that needs a table, the Idempotency-Key record, belongs to integrations: it fills
core.idempotency.IDEMPOTENCY with its three functions in IntegrationsConfig.ready()."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db.models import QuerySet
from django.http import HttpResponseNotModified
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import MethodNotAllowed, NotFound, ParseError, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from core.api import (
    PayloadTooLarge,
    PreconditionFailed,
    SyncParamsBackend,
    parse_updated_since,
)
from core.api_schema import declared_request_fields
from core.db import retry_on_deadlock
from core.idempotency import IDEMPOTENCY, IdempotentReplay
from core.ratelimit import rate_hit, set_rate_limit_headers

PAGINATION_PARAMS = ("cursor", "page_size")


def _bad_text(text: str) -> bool:
    return "\x00" in text or any("\ud800" <= char <= "\udfff" for char in text)


class ApiView(APIView):
    """An API view: unknown query parameters are a 400, unsafe requests honour Idempotency-Key."""

    query_params_allowed: tuple[str, ...] = ()
    # True where every unsafe handler calls check_if_match on the versioned object it changes; on
    # any other view an If-Match naming a tag cannot match (it gives no ETag): 412, nothing done.
    honours_if_match = False
    _idempotency_record = None

    def allowed_query_params(self) -> set[str]:
        return set(self.query_params_allowed)

    def check_query_params(self, request) -> None:
        allowed = self.allowed_query_params()
        unknown = sorted(set(request.query_params) - allowed)
        if unknown:
            hint = f"Allowed: {', '.join(sorted(allowed))}." if allowed else "This operation takes none."
            raise ValidationError({name: [f"Unknown query parameter. {hint}"] for name in unknown})

    def check_body_fields(self, request) -> None:
        """Unknown body fields are refused like unknown query parameters: 400 naming each one. The
        known fields are the ones the schema declares for this operation's body."""
        allowed = declared_request_fields(self, request.method)
        if allowed is None or not isinstance(request.data, Mapping):
            return
        unknown = sorted(set(request.data) - allowed - {"csrfmiddlewaretoken"})
        if unknown:
            hint = f"Allowed: {', '.join(sorted(allowed))}." if allowed else "This operation takes no body fields."
            raise ValidationError({str(name): [f"Unknown field. {hint}"] for name in unknown})

    def check_text_in_url(self, request, kwargs) -> None:
        """A NUL or lone surrogate in the path matches no object (404) and in the query string is a
        field error (400) — never a database error (PostgreSQL refuses NUL in text)."""
        if any(isinstance(value, str) and _bad_text(value) for value in kwargs.values()):
            raise NotFound("No such object: the address holds characters no identifier has.")
        bad = sorted(name for name, values in request.query_params.lists()
                     if _bad_text(name) or any(_bad_text(value) for value in values))
        if bad:
            raise ValidationError({name: ["Null characters are not allowed."] for name in bad})

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication, permissions, throttles
        # A method the operation does not have is 405 before anything about the request is judged
        # (DRF looks the handler up only after initial(), so a TRACE was refused for its parameters).
        if request.method.lower() not in self.http_method_names or not hasattr(self, request.method.lower()):
            raise MethodNotAllowed(request.method)
        self.check_text_in_url(request, kwargs)
        self.check_query_params(request)
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if declared.isdigit() and int(declared) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            raise PayloadTooLarge(f"The request body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} "
                                  f"bytes the API accepts.")
        if request.method not in SAFE_METHODS:
            if not self.honours_if_match:
                refuse_unmatchable_if_match(request)
            self.check_body_fields(request)
            self._idempotency_record = IDEMPOTENCY.get().begin(request)
            self.retry_write_on_deadlock(request)

    def retry_write_on_deadlock(self, request) -> None:
        """Run this request's write handler under retry_on_deadlock. A write handler calls one
        service, whose transaction is the whole change, so a deadlock or serialization failure
        rolled everything back and the handler can run again (the Idempotency-Key record, taken
        above, stays the same). DRF's dispatch looks the handler up after initial(), so the
        wrapped method set on this per-request instance is the one it calls."""
        name = request.method.lower()
        handler = getattr(self, name, None)
        if handler is not None:
            setattr(self, name, retry_on_deadlock(handler))

    def handle_exception(self, exc):
        if isinstance(exc, IdempotentReplay):
            return exc.response
        # Django refuses an oversized body while it parses it (reading request.data): the API's own
        # error shape, not Django's bare 400 with a traceback in the log.
        if isinstance(exc, RequestDataTooBig):
            exc = PayloadTooLarge(f"The request body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} "
                                  f"bytes the API accepts.")
        elif isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
            exc = ParseError(f"The request body has more fields or files than the API accepts "
                             f"({settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields, "
                             f"{settings.DATA_UPLOAD_MAX_NUMBER_FILES} files).")
        return super().handle_exception(exc)

    def raise_uncaught_exception(self, exc):
        if self._idempotency_record is not None:
            IDEMPOTENCY.get().abandon(self._idempotency_record)
            self._idempotency_record = None
        super().raise_uncaught_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if request.method in ("GET", "HEAD") and response.status_code == 200 and isinstance(response, Response):
            return conditional_get(request, response)
        if self._idempotency_record is not None:
            IDEMPOTENCY.get().complete(self._idempotency_record, response)
            self._idempotency_record = None
        decision = getattr(request, "rate_limit", None)
        if decision is not None:  # after the idempotency record: a replay tells the count of its own time
            set_rate_limit_headers(response, decision)
        return response


class ListApi(ApiView, GenericAPIView):
    """A cursor-paginated list read through a selector. `filterset_class` validates (400 with
    fields) and documents the query parameters; `select()` returns the tenant-scoped queryset;
    `ordering_fields` are what `?ordering=` may name (first = default; `-` for descending); with
    `updated_field`, `?updated_since=<ISO date-time>` keeps rows changed at or after it. The class
    `queryset` is an empty one, there only so the schema generator knows the model."""

    filter_backends = [DjangoFilterBackend, SyncParamsBackend]  # documentation only: list_response filters
    filterset_class = None
    output_serializer_class = None
    ordering_fields: tuple[str, ...] = ("-created_at",)
    updated_field: str | None = None
    list_ordering: tuple[str, ...] = ()

    def allowed_query_params(self) -> set[str]:
        allowed = {*self.query_params_allowed, *PAGINATION_PARAMS}
        if self.request.method in SAFE_METHODS:
            if self.filterset_class is not None:
                allowed |= set(self.filterset_class.base_filters)
            if len(self.ordering_fields) > 1:
                allowed.add("ordering")
            if self.updated_field:
                allowed.add("updated_since")
        else:
            allowed = set(self.query_params_allowed)
        return allowed

    def select(self, request, **params):
        raise NotImplementedError

    def choose_ordering(self, request) -> tuple[str, ...]:
        choices = {*self.ordering_fields, *(field.lstrip("-") for field in self.ordering_fields),
                   *(f"-{field.lstrip('-')}" for field in self.ordering_fields)}
        wanted = request.query_params.get("ordering", self.ordering_fields[0])
        if wanted not in choices:
            raise ValidationError({"ordering": [f"One of: {', '.join(sorted(choices))}."]})
        tiebreak = "-id" if wanted.startswith("-") else "id"
        return (wanted, tiebreak) if wanted.lstrip("-") != "id" else (wanted,)

    def list_response(self, request, **kwargs):
        params = {}
        if self.filterset_class is not None:
            filterset = self.filterset_class(data=request.query_params, queryset=self.queryset)
            if not filterset.is_valid():
                raise ValidationError(filterset.errors)
            params = {key: value for key, value in filterset.form.cleaned_data.items() if value not in ("", None)}
        self.list_ordering = self.choose_ordering(request)
        queryset = self.select(request, **params, **kwargs)
        if self.updated_field and "updated_since" in request.query_params:
            since = parse_updated_since(request.query_params["updated_since"])
            queryset = queryset.filter(**{f"{self.updated_field}__gte": since})
        if isinstance(queryset, QuerySet):
            queryset = queryset.order_by()  # the paginator applies list_ordering
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.output_serializer_class(page, many=True,
                                                                        context=self.list_context(page)).data)

    def list_context(self, page) -> dict:
        return {}


# --- ETag / If-Match -------------------------------------------------------------------------------

def etag_for(obj) -> str:
    """A strong ETag from what makes an object change: a case's version; a notice's version,
    status and content hash; a proposal's status and the case version it was made against."""
    name = type(obj).__name__
    if name == "Case":
        return f'"case-{obj.pk}-v{obj.version}"'
    if name == "Notice":
        return f'"notice-{obj.pk}-v{obj.version}-{obj.status}-{obj.content_hash[:16]}"'
    if name == "Proposal":
        return f'"proposal-{obj.pk}-{obj.status}-c{obj.case_version}"'
    if name == "WebhookEndpoint":
        state = json.dumps([obj.url, sorted(obj.event_types or []), obj.description, obj.is_active,
                            obj.updated_at.isoformat() if obj.updated_at else ""])
        return f'"webhook-{obj.pk}-{hashlib.sha256(state.encode()).hexdigest()[:16]}"'
    raise TypeError(f"no ETag for {name}")


def _tags(header: str) -> set[str]:
    return {tag.strip() for tag in header.split(",")}


def check_if_match(request, obj) -> None:
    """412 when the request carries If-Match and none of its tags is the object's current ETag.
    Strong comparison (RFC 9110 §13.1.1): a weak tag `W/"..."` never matches."""
    header = request.headers.get("If-Match")
    if header is None or header.strip() == "*":
        return
    if etag_for(obj) not in _tags(header):
        raise PreconditionFailed()


def refuse_unmatchable_if_match(request) -> None:
    """An If-Match naming tags, sent to something that gives no ETag, is false (RFC 9110
    §13.1.1): 412, rather than doing the change the client made conditional."""
    header = request.headers.get("If-Match")
    if header is not None and header.strip() != "*":
        raise PreconditionFailed("This resource gives no ETag, so If-Match cannot match; send If-Match only to "
                                 "objects whose answers carry an ETag.")


def with_etag(response, obj):
    response["ETag"] = etag_for(obj)
    return response


def conditional_get(request, response: Response):
    """Every 200 answer to a GET carries a strong ETag: the object's own (with_etag), or else a
    hash of the rendered body (a list page, an object without a version). If-None-Match naming it
    (or `*`) gets 304 with the ETag and no body."""
    if not response.has_header("ETag"):
        response.render()
        response["ETag"] = f'"{hashlib.sha256(response.content).hexdigest()[:32]}"'
    header = request.headers.get("If-None-Match")
    if header is None:
        return response
    tags = {tag.removeprefix("W/") for tag in _tags(header)}  # If-None-Match compares weakly
    if header.strip() != "*" and response["ETag"] not in tags:
        return response
    not_modified = HttpResponseNotModified()
    for name in ("ETag", "Vary", "Cache-Control"):
        if response.has_header(name):
            not_modified[name] = response[name]
    return not_modified


# --- per-credential throttles ---------------------------------------------------------------------

class CredentialThrottle(BaseThrottle):
    """A rate per credential (an API key has its own service account, so per user = per key) on
    the unsafe requests of the view; reads are not counted. The count is shared by every process
    (core.ratelimit); the decision is kept on the request for the RateLimit-* headers."""

    scope = ""
    rate_setting = ""

    def allow_request(self, request, view):
        if request.method in SAFE_METHODS or not request.user or not request.user.is_authenticated:
            return True
        # The rate is read at request time (not import time), so the setting is the one in force.
        decision = rate_hit(scope=self.scope, ident=str(request.user.pk), rate=getattr(settings, self.rate_setting))
        request.rate_limit = decision
        self._wait = decision.reset_seconds
        return not decision.is_over

    def wait(self):
        return self._wait


class RunStartThrottle(CredentialThrottle):
    scope = "run_start"
    rate_setting = "ARBITER_API_THROTTLE_RUN_START"


class MessagePostThrottle(CredentialThrottle):
    scope = "message_post"
    rate_setting = "ARBITER_API_THROTTLE_MESSAGE_POST"
