"""Reading an inbound message: its organisation, its replay key, the case it quotes, its text."""

from anymail.inbound import AnymailInboundMessage

from intake import mail


def message(headers, text="Hello", html=None):
    return AnymailInboundMessage.construct(headers=headers, text=text, html=html)


def test_the_organisation_is_the_local_part_at_the_inbound_domain():
    found = message([["From", "a@example.net"], ["To", "Someone <x@elsewhere.org>, Acme <ACME@Inbound.Example>"]])
    assert mail.tenant_slug(found, domain="inbound.example") == "acme"
    found.envelope_recipient = "beta@inbound.example"
    assert mail.tenant_slug(found, domain="inbound.example") == "beta"  # the envelope first
    assert mail.tenant_slug(message([["To", "x@elsewhere.org"]]), domain="inbound.example") == ""


def test_the_key_is_the_message_id_or_the_hash_of_the_message():
    assert mail.message_key(message([["Message-ID", "<m1@example.net>"]])) == "<m1@example.net>"
    first = mail.message_key(message([["Subject", "no id"]], text="one"))
    assert first.startswith("sha256:") and len(first) == 7 + 64
    assert first == mail.message_key(message([["Subject", "no id"]], text="one"))
    assert first != mail.message_key(message([["Subject", "no id"]], text="two"))


def test_the_reference_is_found_in_the_subject_or_else_the_text():
    assert mail.quoted_reference(message([["Subject", "Re: [CASE-2026-000123] fee"]])) == "CASE-2026-000123"
    assert mail.quoted_reference(message([["Subject", "Re: fee"]], text="About CASE-2025-000007.")) == \
        "CASE-2025-000007"
    assert mail.quoted_reference(message([["Subject", "CASE-2026-12"]], text="none")) == ""


def test_the_text_is_the_text_part_or_the_html_as_text():
    assert mail.body_text(message([], text="  plain  ", html="<p>html</p>")) == "plain"
    assert mail.body_text(message([], text=None, html="<div>One<br>Two <script>x()</script></div>")) == "One\nTwo"
