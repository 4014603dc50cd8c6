"""E-mail intake through Postmark's inbound webhook: the Django test client POSTs the JSON Postmark
posts for an inbound message (its fields as Postmark documents them, attachments base64 in
"Attachments"), behind the webhook URL's basic auth (ANYMAIL_WEBHOOK_SECRET) — Postmark signs
nothing, so the basic auth is what anymail checks."""

from __future__ import annotations

import base64
import json

import pytest
from django.urls import reverse

from cases.models import Case, EvidenceKind
from intake.models import InboundMessage, InboundStatus
from tests.cases.test_extraction import text_pdf
from tests.helpers import assert_nothing_changed
from tests.intake.test_email import BODY, PDF_TEXT, SENDER, extracted

SECRET = "postmark-user:tests-only-postmark-password"


@pytest.fixture
def inbound(tenant, settings):
    settings.INBOUND_EMAIL_PROVIDER = "postmark"
    settings.INBOUND_EMAIL_DOMAIN = "inbound.arbiter.test"
    settings.ANYMAIL_WEBHOOK_SECRET = SECRET
    return f"{tenant.slug}@inbound.arbiter.test"


def postmark_post(client, *, to, subject="Overdraft fee charged twice", text=BODY, message_id="<pm-1@mail.example.net>",
                  pdf: bytes | None = None, headers=(), auth=SECRET):
    """POST to /inbound/email/ what Postmark's inbound webhook posts for a parsed message."""
    payload = {
        "FromName": "Pat Consumer", "From": SENDER, "FromFull": {"Email": SENDER, "Name": "Pat Consumer"},
        "To": to, "ToFull": [{"Email": to, "Name": ""}], "CcFull": [], "BccFull": [],
        "OriginalRecipient": to, "Subject": subject, "MessageID": "a8c1040e-db1c-4e18-ac79-bc5f64c7ce2c",
        "Date": "Fri, 27 Nov 2026 08:00:00 +0000", "TextBody": text, "HtmlBody": "", "StrippedTextReply": "",
        "Headers": [{"Name": "Return-Path", "Value": f"<{SENDER}>"}, {"Name": "Message-ID", "Value": message_id},
                    *({"Name": name, "Value": value} for name, value in headers)],
        "Attachments": [] if pdf is None else [{"Name": "statement.pdf", "ContentType": "application/pdf",
                                                "Content": base64.b64encode(pdf).decode("ascii"),
                                                "ContentLength": len(pdf)}],
    }
    extra = {} if auth is None else {
        "HTTP_AUTHORIZATION": "Basic " + base64.b64encode(auth.encode("ascii")).decode("ascii")}
    return client.post(reverse("inbound_email"), json.dumps(payload), content_type="application/json", **extra)


def test_a_postmark_message_with_a_pdf_opens_a_case(client, inbound):
    response = postmark_post(client, to=inbound, pdf=text_pdf(PDF_TEXT))
    assert response.status_code == 200, response.content
    row = InboundMessage.objects.get()
    assert (row.status, row.opened_case, row.sender, row.provider) == (InboundStatus.ACCEPTED, True, SENDER, "postmark")
    case = row.case
    assert (case.title, case.complainant_email, case.source) == ("Overdraft fee charged twice", SENDER, "email")
    narrative, pdf = case.evidence.order_by("pk")
    assert (narrative.kind, narrative.text) == (EvidenceKind.TEXT, BODY)
    assert (pdf.kind, pdf.filename) == (EvidenceKind.FILE, "statement.pdf")
    assert "overdraft fee of 35 dollars" in extracted(pdf).read_text()


def test_the_same_postmark_message_delivered_twice_is_one_case(client, inbound):
    postmark_post(client, to=inbound, pdf=text_pdf(PDF_TEXT))
    case = Case.objects.get()
    with assert_nothing_changed(case, extra={"inbound": lambda: InboundMessage.objects.count()}):
        assert postmark_post(client, to=inbound, pdf=text_pdf(PDF_TEXT)).status_code == 200


@pytest.mark.parametrize("auth", [None, "postmark-user:wrong-password"])
def test_a_postmark_post_without_the_right_basic_auth_is_refused_and_nothing_changes(client, inbound, auth):
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count(),
                                       "cases": lambda: Case.objects.count()}):
        response = postmark_post(client, to=inbound, auth=auth)
    assert response.status_code == 400
    assert "did not verify" in response.content.decode()


def test_without_a_webhook_secret_no_postmark_post_is_accepted(client, settings, inbound):
    settings.ANYMAIL_WEBHOOK_SECRET = ""
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count()}):
        response = postmark_post(client, to=inbound)
    assert response.status_code == 403


def test_a_message_postmark_marks_as_spam_is_refused_with_its_reason(client, settings, inbound):
    settings.INBOUND_EMAIL_MAX_SPAM_SCORE = 5.0
    with assert_nothing_changed(extra={"cases": lambda: Case.objects.count()}):
        response = postmark_post(client, to=inbound, headers=[("X-Spam-Status", "Yes"), ("X-Spam-Score", "6.1")])
    assert response.status_code == 200  # received and recorded: Postmark must not retry it
    row = InboundMessage.objects.get()
    assert (row.status, row.case) == (InboundStatus.REFUSED, None)
    assert "marked the message as spam (score 6.1, the limit is 5)" in row.reason


def test_a_postmark_outbound_event_posted_to_the_inbound_url_is_refused(client, inbound):
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count()}):
        response = client.post(reverse("inbound_email"), json.dumps({"RecordType": "Delivery", "MessageID": "x"}),
                               content_type="application/json",
                               HTTP_AUTHORIZATION="Basic " + base64.b64encode(SECRET.encode()).decode())
    assert response.status_code == 400
    assert "not an inbound e-mail" in response.content.decode()


@pytest.mark.parametrize("provider", ["sendgrid", "mailgunn"])
def test_a_provider_not_offered_receives_nothing(client, settings, inbound, provider):
    settings.INBOUND_EMAIL_PROVIDER = provider
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count(),
                                       "cases": lambda: Case.objects.count()}):
        response = postmark_post(client, to=inbound)
    assert response.status_code == 403
    assert "E-mail intake is not configured" in response.content.decode()
