"""E-mail intake through the real inbound endpoint: the Django test client POSTs Mailgun's
"forward" payload (its fields as Mailgun posts them, the attachments as files) signed with the
configured webhook signing key, exactly as Mailgun signs: HMAC-SHA256 of timestamp + token."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from audit.models import AuditEvent
from cases.extraction import evidence_extraction_run
from cases.models import Case, Evidence, EvidenceKind, ExtractionStatus
from intake.models import InboundMessage, InboundStatus
from tests.cases.test_extraction import text_pdf
from tests.helpers import assert_nothing_changed

PDF_TEXT = "Statement of account for May. The overdraft fee of 35 dollars was charged twice."
BODY = "My bank charged me an overdraft fee twice for the same day. Please look into it."
SENDER = "pat.consumer@example.net"


@pytest.fixture
def inbound(tenant, settings):
    settings.INBOUND_EMAIL_PROVIDER = "mailgun"
    settings.INBOUND_EMAIL_DOMAIN = "inbound.arbiter.test"
    return f"{tenant.slug}@inbound.arbiter.test"


def sign(key: str, timestamp: str, token: str) -> str:
    return hmac.new(key.encode("ascii"), f"{timestamp}{token}".encode("ascii"), hashlib.sha256).hexdigest()


def mailgun_post(client, settings, *, to, sender=SENDER, subject="Overdraft fee charged twice", text=BODY,
                 html=None, message_id=None, pdf: bytes | None = None, extra_headers=(), key=None,
                 attachment_type="application/pdf"):
    """POST to /inbound/email/ what Mailgun's forward() route posts for a parsed message."""
    timestamp, token = str(int(time.time())), uuid.uuid4().hex
    headers = [["From", f"Pat Consumer <{sender}>"], ["To", to], ["Subject", subject],
               *([] if message_id == "" else [["Message-Id", message_id or f"<{uuid.uuid4().hex}@mail.example.net>"]]),
               *extra_headers]
    data = {"recipient": to, "sender": sender, "from": f"Pat Consumer <{sender}>", "subject": subject,
            "message-headers": json.dumps(headers), "timestamp": timestamp, "token": token,
            "signature": sign(key or settings.ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY, timestamp, token)}
    if text is not None:
        data["body-plain"] = text
    if html is not None:
        data["body-html"] = html
    if pdf is not None:
        data["attachment-count"] = "1"
        data["attachment-1"] = SimpleUploadedFile("statement.pdf", pdf, content_type=attachment_type)
    return client.post(reverse("inbound_email"), data)


def extracted(evidence: Evidence) -> Evidence:
    evidence_extraction_run(evidence_id=evidence.pk)  # what the task queued on commit does
    return Evidence.objects.select_related("extraction").get(pk=evidence.pk)


def test_a_message_with_a_pdf_opens_a_case_through_the_real_endpoint(client, settings, inbound,
                                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = mailgun_post(client, settings, to=inbound, pdf=text_pdf(PDF_TEXT),
                                message_id="<first@mail.example.net>")
    assert response.status_code == 200, response.content
    row = InboundMessage.objects.get()
    assert (row.status, row.reason, row.opened_case, row.sender) == (InboundStatus.ACCEPTED, "", True, SENDER)
    case = row.case
    assert (case.title, case.complainant_email, case.source) == ("Overdraft fee charged twice", SENDER, "email")
    assert case.next_due is not None  # the intake deadlines, as every new case
    narrative, pdf = case.evidence.order_by("pk")
    assert (narrative.kind, narrative.text) == (EvidenceKind.TEXT, BODY)
    assert (pdf.kind, pdf.filename, pdf.content_type) == (EvidenceKind.FILE, "statement.pdf", "application/pdf")
    assert len(callbacks) >= 1  # the PDF's extraction is queued after the commit
    pdf = extracted(pdf)
    assert pdf.extraction.status == ExtractionStatus.READABLE
    assert "overdraft fee of 35 dollars" in pdf.read_text()
    assert AuditEvent.objects.filter(action="intake.email.accepted", target_id=str(row.pk)).count() == 1

    # The same message delivered again is the same one message: no second case or evidence.
    with assert_nothing_changed(case, extra={"inbound": lambda: InboundMessage.objects.count()}):
        again = mailgun_post(client, settings, to=inbound, pdf=text_pdf(PDF_TEXT),
                             message_id="<first@mail.example.net>")
    assert again.status_code == 200
    assert Case.objects.count() == 1 and case.evidence.count() == 2


def test_a_reply_quoting_the_reference_adds_its_text_and_pdf_to_that_case(client, settings, inbound,
                                                                         django_capture_on_commit_callbacks):
    mailgun_post(client, settings, to=inbound)
    case = Case.objects.get()
    with django_capture_on_commit_callbacks(execute=False):
        response = mailgun_post(client, settings, to=inbound, subject=f"Re: [{case.reference}] your complaint",
                                text="Here is the statement you asked for.", pdf=text_pdf(PDF_TEXT))
    assert response.status_code == 200
    row = InboundMessage.objects.order_by("pk").last()
    assert (row.status, row.case_id, row.opened_case) == (InboundStatus.ACCEPTED, case.pk, False)
    assert Case.objects.count() == 1
    reply_text, pdf = case.evidence.order_by("pk")[1:]
    assert reply_text.text == "Here is the statement you asked for."
    assert "overdraft fee of 35 dollars" in extracted(pdf).read_text()


def test_html_only_message_becomes_text(client, settings, inbound):
    mailgun_post(client, settings, to=inbound, text=None,
                 html="<html><head><style>p{}</style></head><body><p>First line</p><p>Second&nbsp;line</p></body></html>")
    assert Case.objects.get().evidence.get().text == "First line\nSecond line"


def test_a_bad_signature_is_refused_and_nothing_changes(client, settings, inbound):
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count(),
                                       "cases": lambda: Case.objects.count()}):
        response = mailgun_post(client, settings, to=inbound, pdf=text_pdf(PDF_TEXT), key="not-the-key")
    assert response.status_code == 400
    assert "signature did not verify" in response.content.decode()


def test_without_a_signing_key_nothing_is_accepted(client, settings, inbound):
    settings.ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY = ""
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count()}):
        response = mailgun_post(client, settings, to=inbound, key="")
    assert response.status_code == 403


def test_mail_to_no_organisation_is_refused(client, settings, inbound):
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count(),
                                       "cases": lambda: Case.objects.count()}):
        response = mailgun_post(client, settings, to="nobody@inbound.arbiter.test")
    assert response.status_code == 406
    assert "No organisation receives mail at nobody@inbound.arbiter.test" in response.content.decode()


def refused_with(client, settings, inbound, reason_part, cases=(), **post):
    with assert_nothing_changed(*cases, extra={"cases": lambda: Case.objects.count()}):
        response = mailgun_post(client, settings, to=inbound, **post)
    assert response.status_code == 200  # received and recorded: the provider must not retry it
    row = InboundMessage.objects.order_by("pk").last()
    assert row.status == InboundStatus.REFUSED and row.case is None
    assert reason_part in row.reason
    return row


def test_an_oversize_message_is_refused_with_its_reason(client, settings, inbound):
    settings.INBOUND_EMAIL_MAX_BYTES = 1000
    refused_with(client, settings, inbound, "larger than the limit of 1,000 bytes", pdf=text_pdf(PDF_TEXT))


def test_a_spam_scored_message_is_refused_with_its_reason(client, settings, inbound):
    settings.INBOUND_EMAIL_MAX_SPAM_SCORE = 5.0
    refused_with(client, settings, inbound, "marked the message as spam (score 7.5, the limit is 5)",
                 extra_headers=[["X-Mailgun-Sscore", "7.5"]])


def test_a_reply_from_someone_else_is_refused(client, settings, inbound):
    mailgun_post(client, settings, to=inbound)
    case = Case.objects.get()
    row = refused_with(client, settings, inbound, f"The sender is not the complainant of {case.reference}.",
                       cases=[case], sender="someone.else@example.org", subject=f"Re: [{case.reference}]",
                       pdf=text_pdf(PDF_TEXT))
    assert row.sender == "someone.else@example.org"


def test_a_refused_message_delivered_again_stays_one_refusal(client, settings, inbound):
    settings.INBOUND_EMAIL_MAX_BYTES = 1000
    refused_with(client, settings, inbound, "larger than", pdf=text_pdf(PDF_TEXT), message_id="<big@x.example>")
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count()}):
        mailgun_post(client, settings, to=inbound, pdf=text_pdf(PDF_TEXT), message_id="<big@x.example>")


def test_a_reference_the_organisation_does_not_have_is_refused(client, settings, inbound):
    refused_with(client, settings, inbound, "quotes CASE-2020-000999, which is not a case of this organisation",
                 subject="Re: [CASE-2020-000999] my complaint")


def test_an_attachment_of_a_refused_type_refuses_the_message_with_the_reason(client, settings, inbound):
    refused_with(client, settings, inbound, "Files of type application/zip are not accepted",
                 pdf=b"PK\x03\x04 not really a zip", attachment_type="application/zip")


def test_a_message_without_message_id_delivered_twice_is_one_case(client, settings, inbound):
    no_id, pdf = [["Date", "Fri, 27 Nov 2026 08:00:00 +0000"]], text_pdf(PDF_TEXT)
    mailgun_post(client, settings, to=inbound, pdf=pdf, message_id="", extra_headers=no_id)
    assert InboundMessage.objects.get().message_key.startswith("sha256:")
    case = Case.objects.get()
    with assert_nothing_changed(case, extra={"inbound": lambda: InboundMessage.objects.count()}):
        mailgun_post(client, settings, to=inbound, pdf=pdf, message_id="", extra_headers=no_id)


def test_a_signed_request_that_is_not_a_message_is_refused_and_nothing_changes(client, settings, inbound):
    timestamp, token = str(int(time.time())), uuid.uuid4().hex
    data = {"timestamp": timestamp, "token": token, "recipient": inbound,
            "signature": sign(settings.ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY, timestamp, token)}
    with assert_nothing_changed(extra={"inbound": lambda: InboundMessage.objects.count()}):
        missing = client.post(reverse("inbound_email"), data)
        garbled = client.post(reverse("inbound_email"), {**data, "message-headers": "not json"})
    assert (missing.status_code, garbled.status_code) == (400, 400)
    assert "not an inbound e-mail" in garbled.content.decode()
