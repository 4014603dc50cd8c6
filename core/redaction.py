"""The one redactor of personal data for everything that reaches a model.

Every model context is built by agents.context.build_context, which passes the whole context
(case fields, evidence titles and text, chat messages and thread summaries, the question,
memory, findings, earlier outputs) through `redact_context` before the messages are rendered and
the ModelCall is recorded; conversations.context redacts the thread's turns as it builds them.
So the model and the stored record see the same redacted text, and there is no other path.

What is replaced (by a bracketed label, so the model still knows something was there): e-mail
addresses, also written out ("jane (at) example (dot) com") or on a bare host ("jane@localhost");
phone numbers in any national or international format (core.redaction_phones); numbers that
words introduce as an account, loan, member, routing or reference number; the last four digits of
a card or account; social security numbers; dates of birth; payment card numbers (Luhn) and other
long digit runs; street addresses and PO boxes (core.redaction_rules); and any names the caller
passes (the complainant's). Money amounts, dates of events, case references, years and the
CFPB's own XXXX masks are kept. tests/data/redaction_corpus.jsonl measures both sides
(`manage.py redaction_report`).

ARBITER_CONTEXT_REDACTOR may name another function with the signature of `redact_personal_data`
(text, *, names) -> text; `redact_context` applies whichever is configured."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from core import redaction_rules as rules
from core.redaction_phones import find_phones

# Finders in order of precedence: where two spans overlap, the earlier finder's wins (an e-mail
# before the phone number inside it, a labelled account number before the SSN shape it may have).
FINDERS = (
    rules.find_emails,
    rules.find_dates_of_birth,
    rules.find_card_endings,
    rules.find_account_numbers,
    rules.find_ssns,
    rules.find_card_numbers,
    find_phones,
    rules.find_addresses,
    rules.find_long_numbers,
)

# Keys whose values are identifiers, hashes, statuses or dates, never free text: left as they are.
STRUCTURAL_KEYS = frozenset({
    "id", "sha256", "status", "kind", "type", "agent", "today", "reference", "received_at", "version",
    "case_version", "run_id", "sequence", "role", "subject", "code", "risk_level", "deadline_days",
    "policy_rules", "case_status",
})


@dataclass(frozen=True)
class PersonalSpan:
    start: int
    end: int
    label: str


def find_personal_data(text: str) -> list[PersonalSpan]:
    """The spans of `text` to replace, in order and never overlapping."""
    chosen: list[PersonalSpan] = []
    for finder in FINDERS:
        found = sorted(finder(text), key=lambda span: (span[0], -(span[1] - span[0])))
        for start, end, label in found:
            if end <= start or any(start < kept.end and kept.start < end for kept in chosen):
                continue
            chosen.append(PersonalSpan(start, end, label))
    return sorted(chosen, key=lambda span: span.start)


def redact_personal_data(text: str, *, names: Iterable[str] = ()) -> str:
    """Replace personal data in `text`; idempotent (its labels contain nothing it would match)."""
    if not text:
        return text
    pieces, position = [], 0
    for span in find_personal_data(text):
        pieces += [text[position:span.start], span.label]
        position = span.end
    pieces.append(text[position:])
    text = "".join(pieces)
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
