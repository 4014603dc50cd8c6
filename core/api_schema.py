"""The API's schema class (a module of its own: drf-spectacular's AutoSchema reads DRF's settings
on import, which name core.api's parsers, so it cannot be imported from core.api)."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiRequest, PolymorphicProxySerializer
from rest_framework import serializers

from core.api import IF_MATCH_PATTERN
from core.api_fields import EMAIL_CORE, StrictEmailField
from core.paging import CURSOR_EXPIRED_RESPONSE

# Text the server refuses in every string it reads (core.api.check_json_value, DRF's CharField,
# ApiView.check_text_in_url): a NUL character. A lone surrogate is not text a JSON generator
# produces, and JSON Schema cannot name one.
NO_NUL = "^[^\\x00]*$"
# What str.strip() removes (CharField trims by default); a field that may not be blank must keep
# one character that is not among these after trimming.
_WHITESPACE = "".join(f"\\u{code:04x}" for code in range(0x10000) if chr(code).isspace())
NOT_BLANK_NO_NUL = f"^[^\\x00]*[^\\x00{_WHITESPACE}][^\\x00]*$"
# One line of text once trimmed: no line break or control character between its first and last
# visible characters (cases.services.notices: a notice's subject becomes an email header).
_CONTROL = "\\x00-\\x1f\\x7f\\x85\\u2028\\u2029"
ONE_LINE = f"^[{_WHITESPACE}]*[^{_CONTROL}{_WHITESPACE}]([^{_CONTROL}]*[^{_CONTROL}{_WHITESPACE}])?[{_WHITESPACE}]*$"

# An e-mail address (core.api_fields.EMAIL_CORE), with the whitespace the field trims around it.
EMAIL = f"^[{_WHITESPACE}]*{EMAIL_CORE}[{_WHITESPACE}]*$"
EMAIL_OR_BLANK = f"^[{_WHITESPACE}]*({EMAIL_CORE}[{_WHITESPACE}]*)?$"

# The rules the server enforces on these headers (integrations.idempotency, core.api_base).
IDEMPOTENCY_KEY_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[!-~]([ -~]*[!-~])?$"}
IF_MATCH_SCHEMA = {"type": "string", "maxLength": 2000, "pattern": IF_MATCH_PATTERN}


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's schema, with descriptions written for integrators: a view's docstring is
    for developers and never becomes an operation's description (only `extend_schema(description=)`
    does), and every unsafe operation documents the Idempotency-Key and If-Match headers' rules."""

    def get_description(self):
        if self.method.upper() in ("POST", "PUT", "PATCH", "DELETE"):
            return ("Safe to retry: send an `Idempotency-Key` header (any unique string); a repeat with the same "
                    "key and body replays the first answer with `Idempotent-Replayed: true`.")
        return ""

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        """A request's text field states what DRF's CharField enforces beyond its length: no NUL
        character, and (when it may not be blank and trims whitespace) a character that is not
        whitespace."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction == "request" and isinstance(field, serializers.FileField) and not field.allow_empty_file:
            schema["minLength"] = 1  # "The submitted file is empty."
        if direction == "request" and isinstance(field, StrictEmailField):
            schema.pop("format", None)  # the pattern the server enforces says what an address is
            schema["pattern"] = EMAIL_OR_BLANK if field.allow_blank else EMAIL
            return schema
        if direction == "request" and isinstance(field, serializers.CharField) and schema.get("type") == "string" \
                and not {"format", "pattern", "enum"} & set(schema):
            blank_refused = not field.allow_blank and field.trim_whitespace
            schema["pattern"] = NOT_BLANK_NO_NUL if blank_refused else NO_NUL
        return schema

    def _insert_field_validators(self, field, schema):
        """drf-spectacular offers a blank text field with a pattern as oneOf [the pattern, ""]; our
        text patterns already admit "" where blank is allowed, so "" would match both (and oneOf
        none): the field is the pattern alone."""
        super()._insert_field_validators(field, schema)
        if isinstance(field, StrictEmailField) and "pattern" in str(schema):  # a request's address: the pattern alone
            branches = schema.pop("oneOf", [schema])
            schema.update({key: value for key, value in branches[0].items() if key != "format"})
            schema.pop("format", None)
            return
        branches = schema.get("oneOf", [])
        if len(branches) == 2 and branches[1] == {"type": "string", "maxLength": 0} \
                and branches[0].get("pattern") == NO_NUL and not {"format", "minLength"} & set(branches[0]):
            schema.update(schema.pop("oneOf")[0])

    def _map_basic_serializer(self, serializer, direction):
        """A request serializer's `schema_rules` (JSON Schema keywords about the whole object: a
        rule across its fields, e.g. `minProperties`, `oneOf` of required sets) join its schema."""
        schema = super()._map_basic_serializer(serializer, direction)
        if direction == "request":
            schema.update(getattr(serializer, "schema_rules", {}))
            # A rule on a field's text that its service enforces (e.g. a subject is one line).
            for name, pattern in getattr(serializer, "schema_patterns", {}).items():
                schema["properties"][name]["pattern"] = pattern
        return schema

    def get_override_parameters(self):
        parameters = list(super().get_override_parameters())
        if self.method.upper() in ("POST", "PUT", "PATCH", "DELETE"):
            parameters.append(OpenApiParameter(
                "Idempotency-Key", IDEMPOTENCY_KEY_SCHEMA, OpenApiParameter.HEADER, required=False,
                description="1-200 printable ASCII characters, unique per request you mean (a UUID). Kept for "
                            "ARBITER_API_IDEMPOTENCY_TTL_HOURS per credential; the same key with another request "
                            "is a 422."))
            parameters.append(OpenApiParameter(
                "If-Match", IF_MATCH_SCHEMA, OpenApiParameter.HEADER, required=False,
                description="`*` or the ETag(s) you read: the change is made only while one of them is the "
                            "object's current ETag (strong comparison: a weak `W/` tag never matches), else 412 "
                            "and nothing changes. Where the object gives no ETag, only `*` passes. Text that is "
                            "not `*` or entity tags matches nothing: 412."))
        if self.method.upper() == "GET":
            parameters.append(OpenApiParameter(
                "If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
                description="ETags you hold (or `*`): while one is the current ETag, the answer is 304 with no body."))
        return parameters


SUCCESS_TEXT = {
    "200": "Done; the body is the object (or the page of objects) as it is now.",
    "201": "Created; the body is the new object and `Location` its address.",
    "202": "Accepted: queued for a worker; `Location` says where to follow it.",
}


NOT_MODIFIED = {"description": "Not modified: If-None-Match names the current ETag. No body.",
                "headers": {"ETag": {"schema": {"type": "string"}, "description": "The current strong ETag."}}}
BUSY_TEXT = ("The database kept aborting the change for conflicting locks, even after retries; nothing was "
             "changed. Retry after the seconds in Retry-After.")
BUSY_EXAMPLE = {"code": "busy", "detail": "The database is busy with conflicting changes; nothing was changed. "
                                          "Retry shortly."}


PRECONDITION_TEXT = ("If-Match names no current ETag of the object (or the object gives none and If-Match is "
                     "not `*`): nothing was changed. Read it again.")
PRECONDITION_EXAMPLE = {"code": "precondition_failed", "detail": "The object changed since you read it (If-Match "
                                                                 "does not match its ETag): read it again and retry."}


def describe_responses(result, generator, request, public):
    """Postprocessing hook: every success response gets a sentence for a person; every GET its
    ETag and 304, and a list its 410 `cursor_expired`; every write its 503 `busy`
    (core.db.retry_on_deadlock gave up) and its 412 (If-Match)."""
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            responses = operation.get("responses", {})
            for status, response in responses.items():
                if not response.get("description") and status in SUCCESS_TEXT:
                    response["description"] = SUCCESS_TEXT[status]
            if method == "get" and "200" in responses:
                responses["200"].setdefault("headers", {})["ETag"] = NOT_MODIFIED["headers"]["ETag"]
                responses.setdefault("304", NOT_MODIFIED)
            if method == "get" and any(p.get("name") == "cursor" for p in operation.get("parameters", [])) \
                    and "400" in responses:
                content = {media: {"schema": value["schema"], "examples": {"cursor_expired": {
                    "value": CURSOR_EXPIRED_RESPONSE["example"]}}} for media, value in responses["400"]
                    .get("content", {}).items()}
                responses.setdefault("410", {"description": CURSOR_EXPIRED_RESPONSE["description"],
                                             "content": content})
            error = next((responses[code] for code in ("409", "400") if code in responses), None)
            if method in ("post", "put", "patch", "delete") and error and "503" not in responses:
                content = {media: {"schema": value["schema"], "examples": {"busy": {"value": BUSY_EXAMPLE}}}
                           for media, value in error.get("content", {}).items()}
                responses["503"] = {"description": BUSY_TEXT, "content": content}
            if method in ("post", "put", "patch", "delete") and error and "412" not in responses:
                content = {media: {"schema": value["schema"], "examples": {"precondition_failed": {
                    "value": PRECONDITION_EXAMPLE}}} for media, value in error.get("content", {}).items()}
                responses["412"] = {"description": PRECONDITION_TEXT, "content": content}
    return result


WHO_MAY_DO = """
**Who may do what.** People sign in; an API key acts as its own service account with the role it was
created with. A decision needs a person signed in: a key is refused with 403 `person_required`
whatever its role, and a notice approved by anything but a person is never sent.

| action | analyst | supervisor | auditor | admin | API key |
|---|---|---|---|---|---|
| read cases, evidence, proposals, notices, runs | yes | yes | yes | yes | yes |
| open cases | yes | yes | — | yes | as its role |
| add evidence; propose; draft, edit, submit, withdraw notices | yes | yes | — | — | as its role |
| move work along (triage … mark ready, return to review) | yes | yes | — | — | as its role |
| start analyses (runs) | yes | yes | — | yes | as its role |
| request sending a notice a person approved | yes | yes | — | — | as its role |
| approve or reject proposals and notices (not your own: four eyes) | — | yes | — | — | never |
| decide, close or reopen a case | — | yes | — | — | never |
| settle a notice whose delivery is unknown | — | yes | — | yes | never |
| read the audit log | — | yes | yes | yes | as its role |
| manage webhooks | — | yes | — | yes | as its role |
"""


def describe_who_may(result, generator, request, public):
    """Postprocessing hook: the API's description carries the who-may-do-what table."""
    info = result.setdefault("info", {})
    info["description"] = f"{info.get('description', '').rstrip()}\n{WHO_MAY_DO}"
    return result


def declared_request_fields(view, method: str) -> set[str] | None:
    """The top-level fields the schema declares for this operation's request body (its
    `extend_schema(request=...)` serializer, found the way drf-spectacular's generator finds it),
    or None when it declares no serializer. The API refuses any other body field (ADR 0022), so the
    server enforces exactly what the schema says."""
    handler = getattr(view, method.lower(), None)
    schema_class = getattr(getattr(handler, "__wrapped__", handler), "kwargs", {}).get("schema")
    if schema_class is None:
        return None
    schema = schema_class()
    schema.view, schema.method = view, method.upper()
    declared = schema.get_request_serializer()
    if isinstance(declared, dict):
        declared = declared.get("application/json", next(iter(declared.values()), None))
    if isinstance(declared, OpenApiRequest):
        declared = declared.request
    if isinstance(declared, PolymorphicProxySerializer):  # one body shape per kind: any of their fields
        shapes = declared.serializers.values() if isinstance(declared.serializers, dict) else declared.serializers
        return {name for shape in shapes for name, field in force_instance(shape).fields.items() if not field.read_only}
    if isinstance(declared, type) and issubclass(declared, serializers.Serializer):
        declared = declared()
    if not isinstance(declared, serializers.Serializer):
        return None  # no serializer (a list, a raw type, an upload): nothing to compare against
    return {name for name, field in declared.fields.items() if not field.read_only}


def _require_body(result: dict, reference: str) -> None:
    """Every operation whose body is `reference` needs a body (an empty one cannot meet it)."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody", {}) if isinstance(operation, dict) else {}
            if any(c.get("schema", {}).get("$ref") == reference for c in body.get("content", {}).values()):
                body["required"] = True


def forbid_unknown_body_fields(result, generator, request, public):
    """Postprocessing hook: a request body's object, and each object nested in it, takes no other
    fields than it declares (`additionalProperties: false`), as the server enforces
    (ApiView.check_body_fields at the top, core.api.KnownFieldsOnly below)."""
    components = result.get("components", {}).get("schemas", {})
    pending = [content.get("schema", {}) for operations in result.get("paths", {}).values()
               for method, operation in operations.items() if method in ("post", "put", "patch")
               for content in operation.get("requestBody", {}).get("content", {}).values()]
    done: set[str] = set()
    while pending:
        reference = pending.pop().get("$ref", "")
        name = reference.rsplit("/", 1)[-1]
        component = components.get(name) if reference else None
        if component is not None and name not in done and "discriminator" in component:  # one shape per kind
            done.add(name)
            pending += component.get("oneOf", [])
            _require_body(result, reference)
            continue
        if component is None or name in done or component.get("type") != "object":
            continue
        done.add(name)
        component["additionalProperties"] = False
        if {"minProperties", "oneOf", "anyOf"} & set(component):  # a body that needs a field cannot be left out
            _require_body(result, reference)
        for prop in component.get("properties", {}).values():
            pending += [prop, *prop.get("allOf", []), *prop.get("oneOf", [])]
    return result


def forbid_nul_in_query_text(result, generator, request, public):
    """Postprocessing hook: a free-text query parameter states that a NUL character is refused
    (ApiView.check_text_in_url: 400 naming it)."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter.get("in") == "query" and schema.get("type") == "string" \
                        and not {"format", "pattern", "enum"} & set(schema):
                    schema["pattern"] = NO_NUL
    return result
