"""core.redaction: the one redactor of personal data for model contexts."""

import pytest

from core.redaction import redact_context, redact_personal_data


@pytest.mark.parametrize("text, expected", [
    ("Write to jane.doe+bank@mail.example.com please", "Write to [email] please"),
    ("Call (555) 123-4567, 555-987-6543, 555.222.3333 or +1 555 444 5555",
     "Call [phone], [phone], [phone] or [phone]"),
    ("SSN 123-45-6789 or 123 45 6789", "SSN [ssn] or [ssn]"),
    ("card 4111 1111 1111 1111, 5500-0000-0000-0004 and 340000000000009",
     "card [card], [card] and [card]"),
    ("account number 12345678; acct #: 0012-3456; routing no. 021000021; loan 55512345",
     "account number [account number]; acct #: [account number]; routing no. [account number]; loan [account number]"),
    ("reference 123456789012 on the letter", "reference [number] on the letter"),
    ("I live at 123 Main Street, Apt 4B, Springfield, IL 62704.", "I live at [address]."),
    ("Send it to 42 N Elm St. or P.O. Box 456", "Send it to [address] or [address]"),
])
def test_each_kind_of_personal_data_is_replaced_by_its_label(text, expected):
    assert redact_personal_data(text) == expected


def test_amounts_dates_references_and_cfpb_masks_survive():
    text = ("I paid $1,234,567.89 and {$1200.00} on 2019-05-10 for 300 dollars on the way; case CASE-2019-000010; "
            "my account was closed in 2019; XXXX/XXXX/2019 account XXXX.")
    assert redact_personal_data(text) == text


def test_names_are_replaced_and_redacting_twice_changes_nothing():
    once = redact_personal_data("Jordan Example (jordan@example.org) wrote", names=("Jordan Example",))
    assert once == "[complainant] ([email]) wrote"
    assert redact_personal_data(once, names=("Jordan Example",)) == once


def test_redact_context_walks_every_string_but_keeps_identifiers():
    context = {"case": {"reference": "CASE-2019-000010", "title": "Call 555-123-4567", "version": 3},
               "evidence": [{"id": 7, "sha256": "1234567890" * 6 + "abcd", "title": "From a@b.org",
                             "text": "SSN 123-45-6789"}],
               "thread": {"recent": [{"sequence": 2, "role": "user", "content": "card 4111111111111111"}]},
               "memory": [{"id": 1, "subject": "tenant", "content": "Lives at 9 Oak Lane"}]}
    redacted = redact_context(context)
    assert redacted == {
        "case": {"reference": "CASE-2019-000010", "title": "Call [phone]", "version": 3},
        "evidence": [{"id": 7, "sha256": "1234567890" * 6 + "abcd", "title": "From [email]", "text": "SSN [ssn]"}],
        "thread": {"recent": [{"sequence": 2, "role": "user", "content": "card [card]"}]},
        "memory": [{"id": 1, "subject": "tenant", "content": "Lives at [address]"}]}
    assert context["case"]["title"] == "Call 555-123-4567"  # a copy: the input is untouched


# What a security review found verbatim in stored model contexts: each must be gone.
REVIEW_FINDINGS = [
    ("my account number is 12345678", "my account number is [account number]"),
    ("acct. no. is 7788 9900", "acct. no. is [account number]"),
    ("call +44 20 7946 0958 today", "call [phone] today"),
    ("or 555-1234 after six", "or [phone] after six"),
    ("write to jane@localhost.", "write to [email]."),
    ("JOHN.DOE (at) example (dot) com", "[email]"),
    ("the card ending 4242 was charged", "the card ending [card] was charged"),
    ("I live at 12 elm street.", "I live at [address]."),
]


@pytest.mark.parametrize("text, expected", REVIEW_FINDINGS)
def test_what_the_security_review_found_is_redacted(text, expected):
    assert redact_personal_data(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("UK office 020 7946 0958, mobile 07700 900123", "UK office [phone], mobile [phone]"),
    ("Paris: +33 1 42 68 53 00", "Paris: [phone]"),
    ("toll free 1-800-555-0199", "toll free [phone]"),
    ("loan number 300-4455-12, member number 8812 3344", "loan number [account number], member number [account number]"),
    ("reference number 4455 6677", "reference number [account number]"),
    ("mail k.ortiz [at] mail [dot] org or sam dot green at gmail dot com", "mail [email] or [email]"),
    ("ending in 1881; last four digits: 5678; XXXX-XXXX-XXXX-4444", "ending in [card]; last four digits: [card]; XXXX-XXXX-XXXX-[card]"),
    ("DOB: 01/02/1980; born on March 3, 1975", "DOB: [date of birth]; born on [date of birth]"),
    ("SSN 987654321, social security number: 078-05-1120", "SSN [ssn], social security number: [ssn]"),
    ("card 4111 1111 1111 1112 (fails Luhn)", "card [number] (fails Luhn)"),
])
def test_other_formats_are_redacted(text, expected):
    assert redact_personal_data(text) == expected


@pytest.mark.parametrize("text", [
    "On 03/14/2023 and March 3, 2022 I paid $1,234.56 under CASE-2019-000010 (complaint 190512-001234).",
    "Claim 2021-000987 was denied; the APR went from 12.99% to 29.99% at 9:30 a.m.",
    "I filed for Chapter 7; Section 1681s-2 of the FCRA and Article 9 of the UCC apply.",
    "I was at the bank at noon, 300 dollars on the way, 5 miles down the road.",
    "The loan of $25,000 over 60 months from 2015 to 2019 in North Carolina.",
    "He was born in a small town; the date of the transfer was 01/15/2020.",
])
def test_ordinary_facts_survive(text):
    assert redact_personal_data(text) == text


def test_every_review_finding_together_is_idempotent():
    text = " ".join(original for original, _ in REVIEW_FINDINGS)
    once = redact_personal_data(text)
    assert redact_personal_data(once) == once
    assert not any(fragment in once for fragment in ("12345678", "7788 9900", "7946 0958", "555-1234",
                                                     "jane@localhost", "JOHN.DOE", "4242", "12 elm street"))
