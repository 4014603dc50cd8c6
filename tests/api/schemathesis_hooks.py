"""Loaded into the Schemathesis process by scripts/schemathesis_live.py (SCHEMATHESIS_HOOKS): two
corrections to Schemathesis 4.32's negative generation for multipart bodies, which reported valid
uploads as "schema-violating request accepted" (ADR 0028, addendum of 2026-11-27).

To break one value of a valid multipart body, Schemathesis appends "*" to a string that has a
`pattern`, then keeps the body only if its validator refuses it. Before validating it replaces
every file (a `Binary`) by "" — and the upload's `file` states `minLength: 1` (an empty file is
refused), so the stand-in alone failed the body: every mutated upload counted as invalid, even
"title*", which still matches the title's pattern, and the server's 201 was reported. The stand-in
here keeps the file's length (as many "x" as it has bytes), so `minLength` and `maxLength` judge the
file as the server does and only the mutated value decides. This changes nothing else in
Schemathesis; if a version renames the function, loading this module fails loudly."""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.specs.openapi import negative
from schemathesis.transport.serialization import Binary


def strip_binary_keeping_length(value: Any) -> Any:
    if isinstance(value, Binary):
        return "x" * len(value.data)
    if isinstance(value, dict):
        return {key: strip_binary_keeping_length(item) for key, item in value.items()}
    if isinstance(value, list):
        return [strip_binary_keeping_length(item) for item in value]
    return value


if not callable(getattr(negative, "_strip_binary", None)):
    raise RuntimeError("schemathesis.specs.openapi.negative._strip_binary is gone: review tests/api/schemathesis_hooks.py")
negative._strip_binary = strip_binary_keeping_length


@schemathesis.hook
def filter_case(context, case) -> bool:
    """A multipart part is text: a "negative" upload whose field was made an integer, a number, a
    boolean or null is sent as its text (`-588632`, `null`), which is a valid value of a text field,
    so it is not a negative case on the wire. Drop those; a list (repeated parts) stays, and a
    positive multipart body never holds such a scalar."""
    if case.media_type != "multipart/form-data" or not isinstance(case.body, dict):
        return True
    return not any(value is None or isinstance(value, bool | int | float) for value in case.body.values())
