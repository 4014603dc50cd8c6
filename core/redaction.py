"""The one redactor of personal data for everything that reaches a model.

Every model context is built by agents.context.build_context, which passes the whole context
(case fields, evidence titles and text, chat messages and thread summaries, the question,
memory, findings, earlier outputs) through `redact_context` before the messages are rendered and
the ModelCall is recorded; conversations.context redacts the thread's turns as it builds them.
So the model and the stored record see the same redacted text, and there is no other path.

What is replaced (by a bracketed label, so the model still knows something was there):
emails, US social security numbers, payment card numbers, phone numbers, account / routing /
loan numbers named as such, other long digit runs (9+), street addresses and PO boxes, and any
names the caller passes (the complainant's). Money amounts, dates, case references and the
CFPB's own XXXX masks are kept.

ARBITER_CONTEXT_REDACTOR may name another function with the signature of `redact_personal_data`
(text, *, names) -> text; `redact_context` applies whichever is configured."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_SSN = re.compile(r"\b\d{3}[- ]\d{2}[- ]\d{4}\b")
# 13-19 digits, optionally grouped by spaces or dashes (4111 1111 1111 1111, 4111-1111-1111-1111).
_CARD = re.compile(r"(?<![\w$.,])\d(?:[ -]?\d){12,18}\b")
_PHONE = re.compile(r"(?<![\w$.])(?:\+?1[ .-]?)?(?:\(\d{3}\)\s?|\d{3}[ .-])\d{3}[ .-]\d{4}\b")
# "account number 12345678", "acct #: 0012-3456", "routing no. 021000021", "loan 55512345".
_ACCOUNT = re.compile(
    r"\b(?P<label>(?:account|acct|a/c|routing|loan|member|policy|iban)\.?(?:\s+(?:number|num|no)\.?|\s*#)?\s*[:#]?\s*)"
    r"(?P<number>(?=[\w-]*\d{4})[A-Z0-9][\w-]{3,})",
    re.IGNORECASE)
_LONG_NUMBER = re.compile(r"(?<![\w$.,])\d{9,}\b")  # amounts keep their $, dots and commas
_STREET_TYPES = (r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|"
                 r"Terrace|Ter|Circle|Cir|Highway|Hwy|Parkway|Pkwy|Square|Sq|Trail|Trl|Plaza")
# "123 Main Street", "42-B N Elm St., Apt 4, Springfield, IL 62704": a number, one to four
# capitalised words and a street type (capitalised: "300 dollars on the way" is not an address).
_ADDRESS = re.compile(
    rf"\b\d{{1,6}}(?:-?[A-Z])?\s+(?:[NSEW]\.?\s+)?(?:[A-Z0-9][A-Za-z0-9'.-]*\s+){{1,4}}(?:{_STREET_TYPES})\b\.?"
    r"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|#)\.?\s*[A-Za-z0-9-]+)?"
    r"(?:,\s*[A-Z][A-Za-z .'-]{1,40}?,\s*[A-Z]{2})?(?:\s+\d{5}(?:-\d{4})?)?")
_PO_BOX = re.compile(r"\bP\.?\s?O\.?\s+Box\s+\d+\b", re.IGNORECASE)

# Keys whose values are identifiers, hashes, statuses or dates, never free text: left as they are.
STRUCTURAL_KEYS = frozenset({
    "id", "sha256", "status", "kind", "type", "agent", "today", "reference", "received_at", "version",
    "case_version", "run_id", "sequence", "role", "subject", "code", "risk_level", "deadline_days",
    "policy_rules", "case_status",
})


def redact_personal_data(text: str, *, names: Iterable[str] = ()) -> str:
    """Replace personal data in `text`; idempotent (its labels contain nothing it would match)."""
    if not text:
        return text
    text = _EMAIL.sub("[email]", text)
    text = _SSN.sub("[ssn]", text)
    text = _CARD.sub("[card]", text)
    text = _PHONE.sub("[phone]", text)
    text = _ACCOUNT.sub(lambda m: f"{m.group('label')}[account]", text)
    text = _LONG_NUMBER.sub("[number]", text)
    text = _PO_BOX.sub("[address]", text)
    text = _ADDRESS.sub("[address]", text)
    for name in names:
        name = (name or "").strip()
        if len(name) >= 3:
            text = re.sub(re.escape(name), "[complainant]", text, flags=re.IGNORECASE)
    return text


def configured_redactor():
    """The text redactor ARBITER_CONTEXT_REDACTOR names (this module's by default)."""
    return import_string(settings.ARBITER_CONTEXT_REDACTOR)


def redact_context(value: Any, *, names: Iterable[str] = (), redactor=None) -> Any:
    """A copy of `value` (dicts, lists, strings, scalars) with every free-text string redacted;
    the values of STRUCTURAL_KEYS are kept."""
    redact = redactor or configured_redactor()
    names = tuple(names)

    def walk(item: Any, key: str | None = None) -> Any:
        if key in STRUCTURAL_KEYS:
            return item
        if isinstance(item, str):
            return redact(item, names=names)
        if isinstance(item, dict):
            return {k: walk(v, k if isinstance(k, str) else None) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)
