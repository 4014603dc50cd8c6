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
     "account number [account]; acct #: [account]; routing no. [account]; loan [account]"),
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
