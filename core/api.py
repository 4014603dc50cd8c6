"""The REST API's shared HTTP layer (no tables): the one error shape, bounded parsers, the JSON
error pages under /api/, identifiers within database range, and the one
representation of a person and of a run id.

Every error body is {code, detail, fields?}: domain errors keep their stable code and status;
DRF's validation errors become `invalid` with per-field messages; DRF's other errors (parse error,
authentication, throttling, 404, 405, 415 ...) keep their own status and code; a body over the
limit is 413 `too_large`; nothing under /api/ answers HTML (see the handlers at the end)."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime

import django_filters
from django import forms
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.urls import register_converter
from django.views import defaults as django_defaults
from django.views.csrf import csrf_failure as django_csrf_failure
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ParseError, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response

from core.db import is_lock_conflict
from core.errors import Busy, DomainError
from core.outages import REQUEST_OUTAGES, outage_kind, outage_response
from core.ratelimit import RateLimitUnavailable, set_rate_limit_headers

# Largest values the database columns hold (PostgreSQL integer / bigint; SQLite holds 64 bits).
INT_MAX = 2**31 - 1
BIGINT_MAX = 2**63 - 1

_SURROGATE = re.compile("[\ud800-\udfff]")


# --- errors ------------------------------------------------------------------------------------

class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = "The request body is too large."


# RFC 9110 §13.1.1: `*`, or a comma-separated list of entity tags, each `"..."` or `W/"..."`.
IF_MATCH_PATTERN = r'^(\*|(W/)?"[!#-~]*"( *, *(W/)?"[!#-~]*")*)$'


class PreconditionFailed(APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_code = "precondition_failed"
    default_detail = ("The object changed since you read it (If-Match does not match its ETag): "
                      "read it again and retry.")


class IdempotencyMismatch(APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "idempotency_key_reused"
    default_detail = ("This Idempotency-Key was already used with a different request; use a new key "
                      "for a new request.")


def _too_large_detail() -> str:
    return (f"The request body is larger than the API accepts ({settings.ARBITER_API_MAX_BODY_BYTES} bytes "
            f"for JSON and forms, {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes for uploads).")


def exception_handler(exc, context):
    if is_lock_conflict(exc):  # a write path not under retry_on_deadlock: still a 503, never a 500
        exc = Busy("The database is busy with conflicting changes; nothing was changed. Retry shortly.",
                   retry_after=1)
    if isinstance(exc, DomainError):
        response = Response(exc.as_dict(), status=exc.http_status)
        if exc.context.get("retry_after"):
            response["Retry-After"] = str(exc.context["retry_after"])
        return response
    if isinstance(exc, RequestDataTooBig):
        return Response({"code": "too_large", "detail": _too_large_detail()},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    # Imported here: rest_framework.views reads DEFAULT_PARSER_CLASSES (this module's parsers) when
    # it is imported, so importing it at the top would be circular when this module loads first.
    from rest_framework.views import exception_handler as drf_exception_handler

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, RateLimitUnavailable):  # an outage of the cache: when to come back, as for any outage
        response["Retry-After"] = str(settings.ARBITER_OUTAGE_RETRY_AFTER_SECONDS)
    # A refusal counted by a rate limit (a throttle, a failed credential) says where the count stands.
    decision = getattr(context.get("request"), "rate_limit", None)
    if decision is not None:
        set_rate_limit_headers(response, decision)
    if isinstance(exc, ValidationError):
        data = response.data
        response.data = {"code": "invalid", "detail": "The request is invalid; see fields.",
                         "fields": data if isinstance(data, dict) else {"non_field_errors": data}}
    elif isinstance(response.data, dict) and "detail" in response.data:
        detail = response.data["detail"]
        response.data = {"code": getattr(detail, "code", None) or getattr(exc, "default_code", "error"),
                         "detail": str(detail)}
    return response


# --- bounded parsers ---------------------------------------------------------------------------

def _read_bounded(stream) -> bytes:
    limit = settings.ARBITER_API_MAX_BODY_BYTES
    if stream is None:
        return b""
    raw = stream.read(limit + 1)
    if len(raw) > limit:
        raise PayloadTooLarge(_too_large_detail())
    return raw


def check_json_value(value, *, max_depth: int) -> None:
    """Refuse nesting deeper than `max_depth` (400 parse error) and strings or keys holding a NUL
    or a lone surrogate (400 with the field named): PostgreSQL cannot store the first, and the
    audit hash cannot encode the second."""
    problems: dict[str, list[str]] = {}
    stack = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, (dict, list)) and depth > max_depth:
            raise ParseError(f"JSON nested deeper than {max_depth} levels.")
        if isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                _check_text(key, path or "non_field_errors", problems)
                stack.append((child, child_path, depth + 1))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                stack.append((child, f"{path}.{index}" if path else str(index), depth + 1))
        elif isinstance(item, str):
            _check_text(item, path or "non_field_errors", problems)
    if problems:
        raise ValidationError(problems)


def _check_text(text: str, path: str, problems: dict) -> None:
    if "\x00" in text:
        problems.setdefault(path, []).append("Null characters are not allowed.")
    elif _SURROGATE.search(text):
        problems.setdefault(path, []).append("Lone surrogate characters are not allowed (invalid Unicode).")


class BoundedJSONParser(JSONParser):
    """JSON with a size limit (413), a depth limit, and no NUL or lone surrogate in any string."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = _read_bounded(stream)
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
        except RecursionError:
            raise ParseError(f"JSON nested deeper than {settings.ARBITER_API_MAX_JSON_DEPTH} levels.") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        check_json_value(data, max_depth=settings.ARBITER_API_MAX_JSON_DEPTH)
        return data


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


# --- identifiers in URLs -----------------------------------------------------------------------

class DatabaseIdConverter:
    """`<id:pk>`: a positive integer that fits a bigint column; anything longer matches no route
    (the JSON 404 of api_not_found) instead of overflowing the database driver."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value) -> str:
        return str(value)


register_converter(DatabaseIdConverter, "id")


# --- one representation for a person and for a run id -------------------------------------------

class KnownFieldsOnly:
    """A nested input serializer that refuses fields it does not declare (400 naming each), as the
    top-level body does (ApiView.check_body_fields): the schema says `additionalProperties: false`."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(str(name) for name in set(data) - set(self.fields))
            if unknown:
                raise ValidationError({name: [f"Unknown field. Allowed: {', '.join(sorted(self.fields))}."]
                                       for name in unknown})
        return super().to_internal_value(data)


class PersonSerializer(serializers.Serializer):
    """A person (or an API key's service account) wherever one appears."""

    id = serializers.IntegerField()
    username = serializers.CharField()
    display_name = serializers.SerializerMethodField(help_text="Full name, or the username when there is none.")

    def get_display_name(self, user) -> str:
        return user.get_full_name() or user.username


@extend_schema_field({"type": "integer", "nullable": True, "description": "A run id (GET /api/v1/runs/{id}/)."})
class RunIdField(serializers.Field):
    """Run ids are stored as text beside the rows a run wrote; they are served as integers."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value):
        text = str(value or "")
        return int(text) if text.isdigit() else None


# --- lists an integration can sync from: core.paging (keyset and snapshot cursors) -------------

def parse_updated_since(raw: str) -> datetime:
    from django.utils.dateparse import parse_datetime

    try:
        value = parse_datetime(raw)
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise ValidationError({"updated_since": ["An ISO 8601 date-time with a time zone, "
                                                 "e.g. 2026-01-31T12:00:00Z."]})
    return value


# --- documentation helpers -----------------------------------------------------------------------

class ErrorOutputSerializer(serializers.Serializer):
    """The body of every refusal: a stable code, a sentence for a person, and field messages."""

    code = serializers.CharField(help_text="invalid, parse_error, not_authenticated, forbidden, not_found, "
                                           "not_allowed, stale, conflict, precondition_failed, too_large, "
                                           "unsupported_media_type, idempotency_key_reused, throttled, ...")
    detail = serializers.CharField(help_text="What went wrong and what to do, for a person.")
    fields = serializers.DictField(
        child=serializers.JSONField(), required=False,
        help_text="Only for invalid input: field name -> its messages, a list of strings. For a field that "
                  "holds an object or a list, the same shape one level down: the nested field's name or the "
                  "item's index -> its messages (e.g. {\"evidence_seen\": {\"0\": [\"A valid integer is "
                  "required.\"]}}).")


ERROR_TEXT = {
    400: ("Invalid input or query parameter; `fields` says which and why.", "invalid",
          {"code": "invalid", "detail": "The request is invalid; see fields.",
           "fields": {"title": ["This field is required."]}}),
    401: ("No credentials, or bad ones. Send `Authorization: Bearer <API key>`.", "not_authenticated",
          {"code": "not_authenticated", "detail": "Authentication credentials were not provided."}),
    403: ("Your role may not do this (`forbidden`), or it is a decision and only a person signed in makes it: "
          "API keys get `person_required`.", "forbidden",
          {"code": "forbidden", "detail": "Only supervisors may approve."}),
    404: ("No such object for your organisation.", "not_found", {"code": "not_found", "detail": "No such case."}),
    409: ("Not possible in the current state, stale, conflicting, or a request with this Idempotency-Key "
          "is still in progress.", "conflict",
          {"code": "not_allowed", "detail": "A closed case cannot be triaged."}),
    412: ("If-Match does not match the object's current ETag: read it again.", "precondition_failed",
          {"code": "precondition_failed", "detail": "The object changed since you read it."}),
    413: ("The body is larger than the limit.", "too_large",
          {"code": "too_large", "detail": "The request body is larger than the API accepts."}),
    415: ("The Content-Type is not one this operation reads.", "unsupported_media_type",
          {"code": "unsupported_media_type", "detail": 'Unsupported media type "text/plain" in request.'}),
    422: ("This Idempotency-Key was used with a different request.", "idempotency_key_reused",
          {"code": "idempotency_key_reused", "detail": "This Idempotency-Key was already used with a "
                                                       "different request."}),
    429: ("Too many requests; wait the seconds in Retry-After.", "throttled",
          {"code": "throttled", "detail": "Request was throttled. Expected available in 20 seconds."}),
}

# What any operation can answer besides its own refusals: authentication and rate limits.
COMMON_READ = (400, 401, 429)
COMMON_WRITE = (400, 401, 409, 413, 415, 422, 429)


def refusals(*codes: int) -> dict:
    """The error responses an operation can give, with a description and an example, for the schema.
    401 and 429 are always added (every operation needs credentials and is rate limited)."""
    wanted = sorted({*codes, 401, 429})
    return {code: OpenApiResponse(ErrorOutputSerializer, description=ERROR_TEXT[code][0],
                                  examples=[OpenApiExample(ERROR_TEXT[code][1], value=ERROR_TEXT[code][2],
                                                           response_only=True, status_codes=[str(code)])])
            for code in wanted}


# --- JSON instead of HTML under /api/ --------------------------------------------------------------

def is_api_request(request) -> bool:
    return request.path.startswith("/api/")


def json_error(code: str, detail: str, status_code: int) -> JsonResponse:
    return JsonResponse({"code": code, "detail": detail}, status=status_code)


def handler400(request, exception=None):
    if is_api_request(request):
        if isinstance(exception, RequestDataTooBig):
            return json_error("too_large", _too_large_detail(), 413)
        return json_error("bad_request", "The request could not be read.", 400)
    return django_defaults.bad_request(request, exception)


def handler403(request, exception=None):
    if is_api_request(request):
        return json_error("forbidden", "You do not have permission to do this.", 403)
    return django_defaults.permission_denied(request, exception)


def handler404(request, exception=None):
    if is_api_request(request):
        return json_error("not_found", f"No API endpoint at {request.path}; the endpoints are listed at "
                                       f"/api/docs/.", 404)
    return django_defaults.page_not_found(request, exception)


def handler500(request):
    # Django calls this inside its `except`: an outage raised outside any view (a session saved to
    # an unreachable database by its middleware) is still a 503, not a 500.
    kind = outage_kind(sys.exc_info()[1])
    if kind is not None:
        REQUEST_OUTAGES[kind].failed(sys.exc_info()[1])
        return outage_response(request, kind)
    if is_api_request(request):
        return json_error("server_error", "The server failed to answer; the error was logged. Retry later.", 500)
    return django_defaults.server_error(request)


def csrf_failure(request, reason=""):
    if is_api_request(request):
        return json_error("csrf_failed", f"CSRF check failed ({reason}). Browser sessions must send the CSRF "
                                         f"token; integrations use `Authorization: Bearer <API key>`.", 403)
    return django_csrf_failure(request, reason=reason)


# --- query parameters ---------------------------------------------------------------------------

class IntegerFilter(django_filters.NumberFilter):
    """A whole number within the bigint range (django-filter's NumberFilter takes decimals)."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("max_value", BIGINT_MAX)
        super().__init__(*args, **kwargs)
        # The schema states the bounds the form field enforces (drf-spectacular reads this override).
        bounds = {"minimum": kwargs.get("min_value"), "maximum": kwargs["max_value"]}
        self._spectacular_annotation = {"field": {"type": "integer",
                                                  **{k: v for k, v in bounds.items() if v is not None}}}


class TextFilter(django_filters.CharFilter):
    """A text query parameter whose schema states what the form field enforces: its maximum length
    and no NUL character (ApiView.check_text_in_url)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        limit = {"maxLength": kwargs["max_length"]} if kwargs.get("max_length") else {}
        self._spectacular_annotation = {"field": {"type": "string", "pattern": "^[^\\x00]*$", **limit}}


class _PresentChoiceField(django_filters.fields.ChoiceField):
    """A choice that, when the parameter is sent, must be one of the choices: `?kind=` is refused
    like `?kind=nonsense`, as an empty `ordering` or event `type` is; leaving it out filters nothing."""

    def clean(self, value):
        if value == "":
            raise forms.ValidationError(
                f"Choose one of: {', '.join(str(key) for key, _label in self.choices if key)}; "
                "leave the parameter out for no filter.", code="invalid_choice")
        return super().clean(value)


class ChoiceFilter(django_filters.ChoiceFilter):
    """django-filter's ChoiceFilter, but an empty value is a 400 (the schema's enum has no "")."""

    field_class = _PresentChoiceField


class SyncParamsBackend:
    """Documents `ordering` and `updated_since` of a ListApi in the schema (the view applies them)."""

    def filter_queryset(self, request, queryset, view):
        return queryset

    def get_schema_operation_parameters(self, view):
        parameters = []
        fields = getattr(view, "ordering_fields", ())
        if len(fields) > 1:
            names = sorted({*(f.lstrip("-") for f in fields), *(f"-{f.lstrip('-')}" for f in fields)})
            parameters.append({"name": "ordering", "in": "query", "required": False,
                               "description": f"Sort order (`-` for descending); default `{fields[0]}`.",
                               "schema": {"type": "string", "enum": names}})
        if getattr(view, "updated_field", None):
            parameters.append({"name": "updated_since", "in": "query", "required": False,
                               "description": "Only what changed at or after this ISO 8601 date-time (with a "
                                              "time zone); with `ordering=updated_at` to sync.",
                               "schema": {"type": "string", "format": "date-time"}})
        return parameters
