"""Input fields of the API that take exactly the JSON type the schema states.

DRF's CharField turns a number into its digits (`"text": 5.96e-08` was stored as "5.96e-08") and
its EmailField and URLField inherit that, while the schema says `type: string`: a client sending a
number by mistake got it stored instead of being told. These fields refuse anything but a JSON
string (400 naming the field, nothing changed). Every request body's text field uses one of them."""

from __future__ import annotations

from django.core.validators import RegexValidator
from rest_framework import serializers

NOT_TEXT = "Must be a string (text in double quotes), not a number, a boolean, a list or an object."


class StrictTextMixin:
    """Refuse a value that is not a JSON string before DRF's CharField converts it to text, and one
    longer than `max_length` as sent: the schema's maxLength counts the whitespace the field then
    trims (DRF measured the trimmed text, so a 301-character subject with leading spaces passed)."""

    default_error_messages = {"not_text": NOT_TEXT}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_text")
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class StrictCharField(StrictTextMixin, serializers.CharField):
    """A text field of a request body: a JSON string only."""


# An address as the API takes it: a dot-atom local part, `@`, and a domain of dotted labels (the
# last of two or more letters) — what Django's EmailValidator takes, minus the quoted local
# parts, literal IP addresses, dotless hosts and non-ASCII domains it also takes. The schema states this pattern
# instead of `format: email`, whose reading differs between validators (Django took `h_^@ns.org`,
# Schemathesis's validator did not), and the server enforces it: both say the same.
_ATOM = "[-!#$%&'*+/=?^_`{|}~0-9A-Za-z]+"
EMAIL_CORE = (f"{_ATOM}(\\.{_ATOM})*@([A-Za-z0-9]([A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?\\.)+"
              "[A-Za-z][A-Za-z-]{0,61}[A-Za-z]")
EMAIL_MESSAGE = "Enter an e-mail address such as name@example.org."
EMAIL_MAX_LENGTH = 254  # the model's column


class StrictEmailField(StrictTextMixin, serializers.EmailField):
    """An e-mail address field of a request body: a JSON string only, matching EMAIL_CORE (once
    trimmed) as well as Django's validator, at most 254 characters."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", EMAIL_MAX_LENGTH)
        super().__init__(**kwargs)
        self.validators.append(RegexValidator(f"^{EMAIL_CORE}\\Z", message=EMAIL_MESSAGE))


class StrictURLField(StrictTextMixin, serializers.URLField):
    """A URL field of a request body: a JSON string only."""


class StrictIntegerField(serializers.IntegerField):
    """An integer field of a request body: a JSON number with no fractional part (1 and 1.0, as
    JSON Schema's `integer`), never a string of digits or a boolean (DRF takes "3" and true)."""

    default_error_messages = {"not_number": "Must be a whole number, not text, a boolean, a list or an object."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("not_number")
        return super().to_internal_value(data)
