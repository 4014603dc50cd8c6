"""The patterns behind core.redaction, one finder per kind of personal data.

Each finder yields (start, end, label) spans of the text as given; core.redaction resolves
overlaps and replaces. Where words introduce a number ("account number", "DOB", "card ending"),
only the number is replaced, so the model still reads what kind of thing was there.

Care is taken over what must survive: money ("$1,234.56", "{$1200.00}"), dates of events
("03/14/2023", "March 3, 2022"), case and complaint references ("CASE-2019-000010"), years,
percentages, times, section numbers and the CFPB's own "XXXX" masks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

Span = tuple[int, int, str]

# --- e-mail ---------------------------------------------------------------------------------
# A host without a dot counts too ("jane@localhost"); "@handle" alone (no local part) does not.
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]*\w@[A-Za-z0-9](?:[\w-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9][\w-]*)*")

# Written out to beat scrapers: "john.doe (at) example (dot) com", "jane [at] mail [dot] org",
# "pat dot lee at gmail dot com". A bracketed "(at)" is clear enough on its own; a bare " at "
# is prose ("I was at the bank") unless a " dot " and a known top-level domain follow.
_WORD = r"[A-Za-z0-9][\w+-]*"
_AT_MARKED = r"\s*[(\[{<]\s*at\s*[)\]}>]\s*"
_DOT_MARKED = r"\s*[(\[{<]\s*dot\s*[)\]}>]\s*"
_TLD = r"(?:com|org|net|edu|gov|mil|io|co|uk|us|ca|de|fr|info|biz|me|ai|app|dev|mail)\b"
_LOCAL_PART = rf"{_WORD}(?:(?:\.|{_DOT_MARKED}|\s+dot\s+){_WORD})*"
_OBFUSCATED_EMAIL = re.compile(
    rf"(?<![\w.]){_LOCAL_PART}{_AT_MARKED}{_WORD}(?:(?:\.|{_DOT_MARKED}|\s+dot\s+){_WORD})*"
    rf"|(?<![\w.]){_LOCAL_PART}\s+at\s+{_WORD}(?:(?:\.|\s+dot\s+){_WORD})*?(?:\.|\s+dot\s+){_TLD}",
    re.IGNORECASE)


def find_emails(text: str) -> Iterator[Span]:
    for match in _EMAIL.finditer(text):
        yield match.start(), match.end(), "[email]"
    for match in _OBFUSCATED_EMAIL.finditer(text):
        yield match.start(), match.end(), "[email]"


# --- numbers introduced by words --------------------------------------------------------------
# Digits, possibly grouped by single spaces or dashes ("7788 9900", "0012-3456"); at least four.
_GROUPED_DIGITS = r"(?=(?:\d[ -]?){4})\d+(?:[ -]\d{2,}){0,5}(?![\d-])"
_INTRO = r"(?:\s*(?:is|was|:|#|-|=)\s*|\s+)*"
# Before a birth date or an SSN a comma or a few verbs may come too: "my DOB, 10/31/1966",
# "my birth date was given as Oct. 3, 1991".
_LOOSE_INTRO = r"(?:\s*(?:is|was|were|are|of|on|as|given|listed|shown|recorded|:|#|-|=|,)\s*|\s+)*"
_NUMBER_WORD = r"(?:\s*(?:number|num|no|nr|#|id)\b\.?|\s*#)"
_ACCOUNT_WORDS = (r"account|acct|acc|a/c|routing|loan|mortgage|member(?:ship)?|customer|client|policy|"
                  r"iban|checking|savings|contract|billing|subscriber|sort code")
_ACCOUNT = re.compile(
    # "account number 12345678", "acct. no. is 7788 9900", "Account: 0012-3456", "loan 55512345"
    rf"\b(?:{_ACCOUNT_WORDS})\.?(?:{_NUMBER_WORD})?{_INTRO}(?P<number>{_GROUPED_DIGITS}"
    r"|(?=[A-Z0-9 -]*\d{4})[A-Z]{2}\d{2}(?:[ -]?[A-Z0-9]{2,4}){2,8})"
    # "reference number 4455 6677", "ref. no. 99001122" (a bare "reference CASE-..." is not one)
    rf"|\b(?:reference|ref)\.?{_NUMBER_WORD}{_INTRO}(?P<reference>{_GROUPED_DIGITS})",
    re.IGNORECASE)

# The last digits of a card or account: "card ending 4242", "ending in 4242", "last four 4242",
# "last 4 digits: 4242", "XXXX-XXXX-XXXX-4242".
_CARD_ENDING = re.compile(
    r"\b(?:end(?:s|ing)?|ended)\s+(?:in|with)?\s*[:#-]?\s*(?P<a>\d{4})\b"
    r"|\blast\s+(?:four|4)(?:\s+digits?)?(?:\s+(?:of|on)\s+(?:my|the|his|her|their)\s+\w+)?"
    r"(?:\s*(?:is|are|were|was|:|#|-)\s*|\s+)(?P<b>\d{4})\b"
    r"|(?<![\w*•])(?:[X*•]{4}[ -]?){2,3}(?P<c>\d{4})\b",
    re.IGNORECASE)


def find_account_numbers(text: str) -> Iterator[Span]:
    for match in _ACCOUNT.finditer(text):
        group = "number" if match.group("number") is not None else "reference"
        yield match.start(group), match.end(group), "[account number]"


def find_card_endings(text: str) -> Iterator[Span]:
    for match in _CARD_ENDING.finditer(text):
        group = next(name for name in ("a", "b", "c") if match.group(name) is not None)
        yield match.start(group), match.end(group), "[card]"


# --- social security numbers ------------------------------------------------------------------
_SSN_WORDS = r"(?:ssn|ss#|ss\s+no\.?|ss\s+number|itin|social(?:\s+security)?(?:\s+(?:number|no\.?|#))?|tax\s+id)"
_SSN_INTRODUCED = re.compile(
    rf"\b{_SSN_WORDS}{_LOOSE_INTRO}(?:(?:ending|ends)\s+(?:in|with)?\s*)?"
    r"(?P<number>\d{3}[-. ]?\d{2}[-. ]?\d{4}|\d{4})(?!\d)", re.IGNORECASE)
_SSN_SHAPE = re.compile(r"(?<![\w$.,/-])\d{3}([- .])\d{2}\1\d{4}(?![\w/]|[.,-]\d)")


def find_ssns(text: str) -> Iterator[Span]:
    for match in _SSN_INTRODUCED.finditer(text):
        yield match.start("number"), match.end("number"), "[ssn]"
    for match in _SSN_SHAPE.finditer(text):
        yield match.start(), match.end(), "[ssn]"


# --- dates of birth -------------------------------------------------------------------------
# Only a date that words introduce as a birth date; the dates of events stay.
_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?")
_DATE = (r"\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}|\d{4}-\d{1,2}-\d{1,2}"
         rf"|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
         rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+\d{{4}}|{_MONTH},?\s+\d{{4}}")
_DATE_OF_BIRTH = re.compile(
    r"(?:\bD\.?O\.?B\b\.?|\bdate\s+of\s+birth\b|\bbirth\s*date\b|\bbirthday\b|\bborn\b(?:\s+on)?)"
    rf"{_LOOSE_INTRO}(?P<date>{_DATE})", re.IGNORECASE)


def find_dates_of_birth(text: str) -> Iterator[Span]:
    for match in _DATE_OF_BIRTH.finditer(text):
        yield match.start("date"), match.end("date"), "[date of birth]"


# --- payment cards and other long numbers ---------------------------------------------------------
# 13-19 digits, optionally grouped by spaces or dashes (4111 1111 1111 1111, 3400-000000-00009).
_CARD = re.compile(r"(?<![\w$.,-])\d(?:[ -]?\d){12,18}(?![\w-]|[.,]\d)")
_LONG_NUMBER = re.compile(r"(?<![\w$.,-])\d{9,}(?![\w-]|[.,]\d)")  # amounts keep their $, dots, commas


def luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def find_card_numbers(text: str) -> Iterator[Span]:
    """Luhn-valid runs are cards; a grouped run that fails the check is still someone's number."""
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        yield match.start(), match.end(), "[card]" if luhn_valid(digits) else "[number]"


def find_long_numbers(text: str) -> Iterator[Span]:
    for match in _LONG_NUMBER.finditer(text):
        yield match.start(), match.end(), "[number]"


# --- street addresses -----------------------------------------------------------------------
_STREET_TYPES = (r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|"
                 r"Terrace|Ter|Circle|Cir|Highway|Hwy|Parkway|Pkwy|Square|Sq|Trail|Trl|Plaza|Crescent|Close")
# Lower-case street types that prose rarely uses after a number and a word or two.
_PLAIN_STREET_TYPES = r"street|avenue|ave|road|boulevard|blvd|lane|drive|parkway|terrace|st|rd"
# Words that show a number and a street type are prose, not an address: "300 dollars on the way".
_PROSE_WORDS = frozenset(
    "a an the of on to in for by at and or but my his her their our your its this that these those per "
    "from with was were is are be been into onto down up off over all more less than times days weeks "
    "months years dollars cents miles minutes hours percent pages calls people".split())
_NUMBER = r"\d{1,6}(?:-?[A-Z])?\b"
_TAIL = (r"\.?(?:,?\s+(?:N|S|E|W|NE|NW|SE|SW)\b\.?)?"
         r"(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|Flat|#)\.?\s*[A-Za-z0-9-]+)?"
         r"(?:,\s*[A-Z][A-Za-z .'-]{1,40}?,\s*[A-Z]{2})?(?:\s+\d{5}(?:-\d{4})?)?")
_ADDRESS = re.compile(
    rf"(?<![\w$.,/-]){_NUMBER}\s+(?:[NSEW]\.?\s+)?(?P<name>(?:[A-Z0-9][A-Za-z0-9'.-]*\s+){{1,4}})"
    rf"(?:{_STREET_TYPES})\b{_TAIL}")
_PLAIN_ADDRESS = re.compile(
    rf"(?<![\w$.,/-]){_NUMBER}\s+(?P<name>(?:[a-z][a-z'-]*\s+){{1,3}})(?:{_PLAIN_STREET_TYPES})\b{_TAIL}")
_ABBREVIATED_END = re.compile(r"\b(?:St|Ave|Rd|Blvd|Ln|Dr|Ct|Pl|Ter|Cir|Hwy|Pkwy|Sq|Trl|[NSEW]|Apt|Ste)\.$",
                              re.IGNORECASE)
_PO_BOX = re.compile(r"\bP\.?\s?O\.?\s+Box\s+\d+\b|\bPost\s+Office\s+Box\s+\d+\b", re.IGNORECASE)


def find_addresses(text: str) -> Iterator[Span]:
    for pattern in (_ADDRESS, _PLAIN_ADDRESS):
        for match in pattern.finditer(text):
            words = match.group("name").lower().split()
            if any(word.strip(".'") in _PROSE_WORDS for word in words):
                continue
            end = match.end()
            if match.group().endswith(".") and not _ABBREVIATED_END.search(match.group()):
                end -= 1  # "12 elm street." ends a sentence; the dot of "42 N Elm St." is the street's
            yield match.start(), end, "[address]"
    for match in _PO_BOX.finditer(text):
        yield match.start(), match.end(), "[address]"
