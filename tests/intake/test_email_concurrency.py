"""The same e-mail delivered twice at the same moment (a provider retrying while the first POST
is still being handled) is one message, one case, one set of evidence: the second insert of the
message's unique key waits for the first transaction, then finds its row."""

import threading

import pytest
from django.db import connection
from django.test import Client

from cases.models import Case, Evidence
from intake.models import InboundMessage
from tests.cases.test_extraction import text_pdf
from tests.intake.test_email import PDF_TEXT, mailgun_post

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_deliveries_of_one_message_at_once_are_one_case(tenant, settings):
    settings.INBOUND_EMAIL_DOMAIN = "inbound.arbiter.test"
    to = f"{tenant.slug}@inbound.arbiter.test"
    barrier = threading.Barrier(2)
    statuses: list = [None, None]

    def deliver(index):
        try:
            barrier.wait(timeout=30)
            response = mailgun_post(Client(), settings, to=to, pdf=text_pdf(PDF_TEXT), message_id="<same@x.example>")
            statuses[index] = response.status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert statuses == [200, 200]
    assert InboundMessage.objects.count() == 1
    assert Case.objects.count() == 1
    assert Evidence.objects.count() == 2  # the narrative and the PDF, once
