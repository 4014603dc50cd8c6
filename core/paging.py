"""Paging that never skips or repeats (ADR 0028): keyset cursors on (key, id) for the orderings
whose key never changes, and snapshot-bound cursors for a key that does.

- **Immutable key** (`id`, `created_at`, `sequence`): the cursor carries the last row's key and
  id; the next page is every row after that pair in the list's order. Rows inserted or changed
  while a client walks the list cannot move a row across the cursor, so each row that exists for
  the whole walk is listed exactly once (a row inserted behind the cursor is listed by the next
  walk; one inserted ahead of it, in this one).
- **Mutable key** (a field the model sets on every save, `updated_at`): the first page takes a
  snapshot of the list's ids in order and keeps it in the shared cache for
  ARBITER_API_SNAPSHOT_TTL_SECONDS; the cursor names the snapshot and an offset in it. The walk
  lists the rows that matched when the first page was read, in their order then, each exactly
  once, each with its state when its page is read. A row changed during the walk is not listed
  again; a sync reads `updated_since=<when the walk began>` next to get those changes. A row
  deleted, or no longer matching the list's filters, when its page is read is left out.

A cursor is plain text: `n.<key>.<id>` / `p.<key>.<id>` (the page after / before that
position; a date-time key in microseconds since 1970) or `s.<snapshot>.<offset>`. Text that is
not a cursor is a 400 `invalid` naming `cursor`; a cursor this list cannot continue from (its
snapshot expired, or it belongs to another list or ordering) is a 410 `cursor_expired`: read the
list again from its first page. Any position is a valid position (one past the end gives an
empty page), so every text the schema's pattern allows is one of these two answers or a page."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.db.models import Q
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.pagination import BasePagination
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

BIGINT_MAX = 2**63 - 1
INVALID_CURSOR = "Invalid cursor: use the `next` or `previous` link as given."
EXPIRED_CURSOR = ("This list cannot continue from this cursor: its snapshot has expired, or it belongs to another "
                  "list or ordering. Read the list again from its first page.")
CURSOR_PATTERN = r"^([np]\.-?[0-9]{1,18}\.[0-9]{1,18}|s\.[0-9a-f]{32}\.[0-9]{1,9})$"
_CURSOR = re.compile(CURSOR_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SURROGATE = re.compile("[\ud800-\udfff]")
_SNAPSHOT_KEY = "api-list-snapshot:{token}"


def is_mutable(field) -> bool:
    """A key the model changes on every save (auto_now) cannot carry a keyset cursor."""
    return bool(getattr(field, "auto_now", False))


CURSOR_EXPIRED_RESPONSE = {
    "description": "This list cannot continue from the cursor (its snapshot expired, or it is another list's): "
                   "read the list again from its first page.",
    "example": {"code": "cursor_expired", "detail": EXPIRED_CURSOR}}


class CursorExpired(APIException):
    status_code = status.HTTP_410_GONE
    default_code = "cursor_expired"
    default_detail = EXPIRED_CURSOR


def decode_cursor(raw: str) -> tuple[str, str, int]:
    """(kind, key or snapshot, id or offset), or 400 when the text is not a cursor."""
    if not _CURSOR.match(raw):
        raise ValidationError({"cursor": [INVALID_CURSOR]})
    kind, middle, last = raw.split(".")
    return kind, middle, int(last)


def key_to_text(value) -> str:
    """A key as a cursor holds it: an integer; a date-time in microseconds since 1970 (exact)."""
    if isinstance(value, datetime):
        delta = value - _EPOCH
        return str((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
    return str(int(value))


def key_from_text(field, text: str):
    """The key a cursor names, for comparing with `field`. Any position is valid: a date-time
    beyond the calendar is its first or last instant (the page is then everything or nothing)."""
    number = int(text)
    if not isinstance(field, models.DateTimeField):
        return number
    try:
        return _EPOCH + timedelta(microseconds=number)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC) if number > 0 else datetime.min.replace(tzinfo=UTC)


class KeysetPagination(BasePagination):
    """The API's lists: `page_size` up to ARBITER_API_MAX_PAGE_SIZE, the ordering the view chose
    (ListApi.choose_ordering: the key, then `id` the same way), keyset or snapshot cursors."""

    page_size_query_param = "page_size"
    cursor_query_param = "cursor"

    @property
    def max_page_size(self) -> int:
        return settings.ARBITER_API_MAX_PAGE_SIZE

    @property
    def default_page_size(self) -> int:
        return settings.ARBITER_API_PAGE_SIZE

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.default_page_size
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_page_size:
            raise ValidationError({"page_size": [f"A whole number from 1 to {self.max_page_size}."]})
        return int(raw)

    def paginate_queryset(self, queryset, request, view=None):
        self.request, self.page_size = request, self.get_page_size(request)
        self.ordering = tuple(view.list_ordering)
        raw = request.query_params.get(self.cursor_query_param)
        cursor = decode_cursor(raw) if raw is not None else None
        try:
            field = queryset.model._meta.get_field(self.ordering[0].lstrip("-"))
        except FieldDoesNotExist:  # a programming error in the view, not bad input
            raise ValueError(f"{self.ordering[0]} is not a field of {queryset.model.__name__}") from None
        self.next_cursor = self.previous_cursor = None
        if is_mutable(field):
            return self._snapshot_page(queryset, cursor)
        return self._keyset_page(queryset, cursor, field)

    # --- keyset on (key, id) ----------------------------------------------------------------------

    def _after(self, key: str, value, pk: int, *, forward: bool) -> Q:
        """Rows after (value, pk) in the list's order (forward), or before it."""
        name, descending = key.lstrip("-"), key.startswith("-")
        greater = forward != descending
        op = "gt" if greater else "lt"
        if name == "id":
            return Q(**{f"id__{op}": pk})
        return Q(**{f"{name}__{op}": value}) | Q(**{name: value, f"id__{op}": pk})

    def _keyset_page(self, queryset, cursor: tuple[str, str, int] | None, field) -> list:
        key, size = self.ordering[0], self.page_size
        ordered = queryset.order_by(*self.ordering)
        if cursor is None:
            rows = list(ordered[:size + 1])
            page, more = rows[:size], len(rows) > size
            self.next_cursor = self._position(page[-1], "n") if more else None
            return page
        kind, key_text, pk = cursor
        if kind == "s":
            raise CursorExpired()  # a snapshot's cursor, and this ordering pages by keyset
        value = key_from_text(field, key_text)
        forward = kind == "n"
        if forward:
            rows = list(ordered.filter(self._after(key, value, pk, forward=True))[:size + 1])
            page, more = rows[:size], len(rows) > size
            self.next_cursor = self._position(page[-1], "n") if more else None
            self.previous_cursor = self._position(page[0], "p") if page else None
            return page
        backwards = queryset.order_by(*(self._flip(name) for name in self.ordering))
        rows = list(backwards.filter(self._after(key, value, pk, forward=False))[:size + 1])
        page, more = list(reversed(rows[:size])), len(rows) > size
        self.previous_cursor = self._position(page[0], "p") if more else None
        self.next_cursor = self._position(page[-1], "n") if page else None
        return page

    @staticmethod
    def _flip(name: str) -> str:
        return name[1:] if name.startswith("-") else f"-{name}"

    def _position(self, row, direction: str) -> str:
        value = getattr(row, self.ordering[0].lstrip("-"))
        return f"{direction}.{key_to_text(value)}.{row.pk}"

    # --- a snapshot for a mutable key ------------------------------------------------------------------

    def _query_fingerprint(self) -> str:
        """What makes two requests the same list: the credential, the path, the ordering and every
        query parameter but the cursor and the page size."""
        params = sorted((name, value) for name, values in self.request.query_params.lists() for value in values
                        if name not in (self.cursor_query_param, self.page_size_query_param))
        text = repr((self.request.user.pk, self.request.path, self.ordering, params))
        return hashlib.sha256(text.encode()).hexdigest()

    def _snapshot_page(self, queryset, cursor: tuple[str, str, int] | None) -> list:
        fingerprint = self._query_fingerprint()
        if cursor is None:
            limit = settings.ARBITER_API_SNAPSHOT_MAX_ROWS
            ids = list(queryset.order_by(*self.ordering).values_list("pk", flat=True)[:limit + 1])
            if len(ids) > limit:
                raise ValidationError({"ordering": [
                    f"This ordering pages over a snapshot of at most {limit} rows and the list has more: narrow "
                    f"it with updated_since or a filter, or order by another field."]})
            # Named after its content: the same list read twice gives the same first page (and ETag).
            token = hashlib.sha256(f"{fingerprint}:{ids}".encode()).hexdigest()[:32]
            cache.set(_SNAPSHOT_KEY.format(token=token), {"query": fingerprint, "ids": ids},
                      settings.ARBITER_API_SNAPSHOT_TTL_SECONDS)
            offset = 0
        else:
            kind, token, offset = cursor
            snapshot = cache.get(_SNAPSHOT_KEY.format(token=token)) if kind == "s" else None
            if snapshot is None or snapshot["query"] != fingerprint:
                raise CursorExpired()
            ids = snapshot["ids"]
        wanted = ids[offset:offset + self.page_size]
        rows = queryset.order_by().in_bulk(wanted)
        if offset + self.page_size < len(ids):
            self.next_cursor = f"s.{token}.{offset + self.page_size}"
        if offset > 0:
            self.previous_cursor = f"s.{token}.{max(offset - self.page_size, 0)}"
        return [rows[pk] for pk in wanted if pk in rows]

    # --- the answer and its schema ----------------------------------------------------------------------

    def _link(self, cursor: str | None) -> str | None:
        if cursor is None:
            return None
        return replace_query_param(self.request.build_absolute_uri(), self.cursor_query_param, cursor)

    def get_paginated_response(self, data):
        return Response({"next": self._link(self.next_cursor), "previous": self._link(self.previous_cursor),
                         "results": data})

    def get_paginated_response_schema(self, schema):
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {
                "next": {"type": "string", "nullable": True, "format": "uri",
                         "description": "The next page, or null on the last page."},
                "previous": {"type": "string", "nullable": True, "format": "uri",
                             "description": "The page before, or null on the first page."},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view):
        return [
            {"name": self.cursor_query_param, "required": False, "in": "query",
             "description": "The cursor of the `next` or `previous` link of the page before, as given. Ordered by "
                            "a key that never changes, pages follow (key, id); ordered by `updated_at`, pages "
                            "follow a snapshot of the list taken by its first page (kept "
                            f"{settings.ARBITER_API_SNAPSHOT_TTL_SECONDS} s). Never skips or repeats a row.",
             "schema": {"type": "string", "pattern": CURSOR_PATTERN, "maxLength": 60}},
            {"name": self.page_size_query_param, "required": False, "in": "query",
             "description": f"Items per page (at most {self.max_page_size}).",
             "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size,
                        "default": self.default_page_size}},
        ]
