"""Keyset (cursor) pagination for lists that can be long (the queue, the inbox, the audit timeline,
the runs). A page is read with `WHERE (key, id) < (last key, last id) ORDER BY key DESC, id DESC
LIMIT n + 1`: as fast on page 4,000 as on page 1 (an index on (tenant, key, id) serves it) and no
COUNT of the whole list first. The cursor is an opaque token that names the row to continue from.

    page = keyset_page(qs, key="sort_key", descending=True, cursor=request.GET.get("after"),
                       before=request.GET.get("before"), size=25)
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import date, datetime

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet

from core.errors import Invalid

BAD_CURSOR = "That page link is out of date or was changed by hand; showing the first page instead."


@dataclass
class KeysetPage:
    object_list: list
    next_cursor: str | None = None
    previous_cursor: str | None = None
    is_first: bool = True
    size: int = 25
    extra: dict = field(default_factory=dict)

    def __iter__(self):
        return iter(self.object_list)

    def __len__(self) -> int:
        return len(self.object_list)

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None

    @property
    def has_previous(self) -> bool:
        return self.previous_cursor is not None

    @property
    def has_other_pages(self) -> bool:
        return self.has_next or self.has_previous


def _plain(value) -> str | int | None:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if value is None or isinstance(value, int):
        return value
    return str(value)


def encode_cursor(key_value, pk: int) -> str:
    raw = json.dumps([_plain(key_value), pk], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> tuple:
    """(key value, id) from a token; Invalid when it is not one of ours."""
    try:
        padded = token + "=" * (-len(token) % 4)
        value, pk = json.loads(base64.urlsafe_b64decode(padded.encode()).decode())
    except (ValueError, TypeError, UnicodeDecodeError):
        raise Invalid(BAD_CURSOR) from None
    if not isinstance(pk, int) or not isinstance(value, str | int | type(None)):
        raise Invalid(BAD_CURSOR)
    return value, pk


def _key_value(qs: QuerySet, key: str, value):
    """The cursor's key value as the key's own type (a date, a number ...). The keys are never NULL
    (sorts whose column may be NULL page on a non-null expression of it, e.g. the due date's
    COALESCE), so a NULL, or a value the key's field rejects, is a cursor we did not make: Invalid."""
    if key == "pk":
        return value
    annotation = qs.query.annotations.get(key)
    field = annotation.output_field if annotation is not None else qs.model._meta.get_field(key)
    if value is None:
        raise Invalid(BAD_CURSOR)
    try:
        converted = field.to_python(value)
        field.get_prep_value(converted)
    except (ValidationError, ValueError, TypeError, OverflowError):
        raise Invalid(BAD_CURSOR) from None
    if converted is None:
        raise Invalid(BAD_CURSOR)
    return converted


def _after(key: str, value, pk: int, *, descending: bool) -> Q:
    """Rows that come after (value, pk) in the order. The redundant `key <= value` bound lets the
    index scan start at the cursor instead of filtering its way there."""
    if key == "pk":
        return Q(pk__lt=pk) if descending else Q(pk__gt=pk)
    if descending:
        return Q(**{f"{key}__lte": value}) & (Q(**{f"{key}__lt": value}) | Q(pk__lt=pk))
    return Q(**{f"{key}__gte": value}) & (Q(**{f"{key}__gt": value}) | Q(pk__gt=pk))


def keyset_page(qs: QuerySet, *, key: str = "pk", descending: bool = True, cursor: str | None = None,
                before: str | None = None, size: int = 25) -> KeysetPage:
    """One page of `qs` in (key, id) order. `cursor` continues after a row, `before` goes back to
    the page that ends before a row. Raises Invalid for a token that is not a cursor (callers show
    the first page and say so)."""
    direction = "-" if descending else ""
    order = [f"{direction}{key}", f"{direction}pk"] if key != "pk" else [f"{direction}pk"]
    if before:
        value, pk = decode_cursor(before)
        value = _key_value(qs, key, value)
        reverse = [o[1:] if o.startswith("-") else f"-{o}" for o in order]
        rows = list(qs.filter(_after(key, value, pk, descending=not descending)).order_by(*reverse)[:size + 1])
        has_more_before = len(rows) > size
        rows = list(reversed(rows[:size]))
        page = KeysetPage(rows, size=size, is_first=not has_more_before)
        if rows:
            page.next_cursor = _cursor_of(rows[-1], key)
            if has_more_before:
                page.previous_cursor = _cursor_of(rows[0], key)
        return page
    if cursor:
        value, pk = decode_cursor(cursor)
        value = _key_value(qs, key, value)
        qs = qs.filter(_after(key, value, pk, descending=descending))
    rows = list(qs.order_by(*order)[:size + 1])
    page = KeysetPage(rows[:size], size=size, is_first=not cursor)
    if len(rows) > size:
        page.next_cursor = _cursor_of(rows[size - 1], key)
    if cursor and rows:
        page.previous_cursor = _cursor_of(rows[0], key)
    return page


def _cursor_of(row, key: str) -> str:
    return encode_cursor(row.pk if key == "pk" else getattr(row, key), row.pk)
