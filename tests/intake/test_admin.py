"""Inbound e-mail in the admin: read-only, its status and reason shown, each tenant's staff
seeing only their own messages."""

import pytest
from django.urls import reverse

from intake.models import InboundMessage, InboundStatus


@pytest.fixture
def messages(tenant, other_tenant):
    mine = InboundMessage.objects.create(tenant=tenant, message_key="<a@x>", provider="mailgun",
                                         sender="pat@example.net", subject="Fee", status=InboundStatus.REFUSED,
                                         reason="The provider marked the message as spam.")
    theirs = InboundMessage.objects.create(tenant=other_tenant, message_key="<b@x>", provider="mailgun",
                                           sender="sam@example.org", subject="Other", status=InboundStatus.ACCEPTED)
    return mine, theirs


def test_staff_see_their_tenants_messages_with_the_reason_read_only(client, supervisor, messages):
    mine, theirs = messages
    supervisor.is_staff = True
    supervisor.save(update_fields=["is_staff"])
    client.force_login(supervisor)
    listing = client.get(reverse("admin:intake_inboundmessage_changelist"))
    assert listing.status_code == 200
    page = listing.content.decode()
    assert "The provider marked the message as spam." in page and "pat@example.net" in page
    assert "sam@example.org" not in page
    detail = client.get(reverse("admin:intake_inboundmessage_change", args=[mine.pk]))
    assert detail.status_code == 200 and 'name="_save"' not in detail.content.decode()
    assert client.get(reverse("admin:intake_inboundmessage_change", args=[theirs.pk])).status_code == 302
    assert client.get(reverse("admin:intake_inboundmessage_add")).status_code == 403
    assert client.post(reverse("admin:intake_inboundmessage_delete", args=[mine.pk]), {"post": "yes"}).status_code == 403
    assert InboundMessage.objects.count() == 2
