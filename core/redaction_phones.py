"""Phone numbers in running text, for core.redaction.

Google's libphonenumber (the `phonenumbers` package) finds numbers in any national or
international format: "+44 20 7946 0958", "020 7946 0958", "(555) 123-4567", "1-800-555-0199",
"+33 1 42 68 53 00". It is asked twice, as a reader in the US and in the UK would read the text,
with the POSSIBLE leniency (the right number of digits for the country) rather than VALID, because
the numbers people write in complaints are often fictional or unallocated (555 exchanges, the UK's
drama ranges) and still must not reach a model. A "+" number is read internationally either way.

POSSIBLE alone would also take identifiers and amounts, so a match is kept only when it looks like
a phone number as written: it carries a "+", a bracket or a separator between digit groups, and is
not glued to a word, an amount or another identifier ("CASE-2019-000010", "$1,234,567",
"190512-001234"). Bare digit runs are left to the long-number rule. Seven-digit local numbers
("555-1234") are matched by a plain pattern, since no metadata can tell them from other numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import phonenumbers

REGIONS = ("US", "GB")
LABEL = "[phone]"
_MIN_DIGITS = 7
# What may not touch a phone number on either side: letters, digits, and the marks that glue an
# identifier or an amount together.
_GLUE_BEFORE = re.compile(r"[\w$#/.,-]$|[A-Za-z]-\s?$")
_GLUE_AFTER = re.compile(r"^(?:[\w/%]|[.,-]\d)")
# Dates and year ranges have the digits of a number in some country: "2019-05-10", "1999-2003".
_DATE_LIKE = re.compile(r"^(?:\d{4}[-. ]\d{1,2}[-. ]\d{1,2}|\d{1,2}[-. ]\d{1,2}[-. ]\d{2,4}|\d{4}\s*-\s*\d{4})$")
# No national format opens with a group of four or more digits that does not start with 0 (a UK
# area code does); "2021-000987" is a reference with a year in front.
_YEAR_FIRST = re.compile(r"^[1-9]\d{3,}\D")
_SEPARATED = re.compile(r"^\+|\(|\d[ .-]+\d")
# "555-1234", "555.1234": a local number without its area code (the exchange never starts 0 or 1).
_LOCAL = re.compile(r"(?<![\w$#/.,-])[2-9]\d{2}[-.]\d{4}(?![\w/-]|[.,]\d)")


def _is_phone_like(text: str, start: int, end: int, raw: str) -> bool:
    digits = sum(ch.isdigit() for ch in raw)
    if digits < _MIN_DIGITS or "," in raw or "/" in raw:
        return False
    if not _SEPARATED.search(raw) or _DATE_LIKE.match(raw):
        return False
    if raw[0] != "+" and _YEAR_FIRST.match(raw):
        return False
    before = text[max(0, start - 2):start]
    if raw[0] != "(" and _GLUE_BEFORE.search(before):
        return False
    return not _GLUE_AFTER.search(text[end:end + 2])


def find_phones(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, "[phone]") for each phone number in `text`, possibly overlapping."""
    for region in REGIONS:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.POSSIBLE):
            if _is_phone_like(text, match.start, match.end, match.raw_string):
                yield match.start, match.end, LABEL
    for match in _LOCAL.finditer(text):
        yield match.start(), match.end(), LABEL
