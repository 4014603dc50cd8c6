"""The inbound e-mail webhook: the provider's anymail view checks the request's signature and
parses the message; instead of sending anymail's `inbound` signal, the view hands the message to
`intake.services.inbound_email_receive` (docs/adr/0034-email-intake.md)."""

from __future__ import annotations

import logging

from anymail.exceptions import AnymailConfigurationError, AnymailWebhookValidationFailure
from anymail.webhooks.mailgun import MailgunInboundWebhookView
from anymail.webhooks.postmark import PostmarkInboundWebhookView
from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt

from core.errors import DomainError
from intake.services import inbound_email_receive

logger = logging.getLogger(__name__)


class _Receive:
    """Mixed in before an anymail inbound view: its checks and parsing, our handler."""

    secret_setting = ""

    def post(self, request, *args, **kwargs):
        if not getattr(settings, self.secret_setting, ""):
            logger.error("Inbound e-mail refused: %s is not set, so no request can be verified.", self.secret_setting)
            return _answer("This address cannot verify deliveries yet; nothing was received.", 403)
        try:
            self.run_validators(request)
        except AnymailWebhookValidationFailure as failure:
            logger.warning("Inbound e-mail refused: the request did not verify (%s).", failure)
            return _answer("The request's signature did not verify; nothing was received.", 400)
        size = int(request.META.get("CONTENT_LENGTH") or 0)
        try:
            events = self.parse_events(request)
        except (AnymailConfigurationError, KeyError, ValueError) as error:
            logger.warning("Inbound e-mail refused: the request is not an inbound message (%r).", error)
            return _answer("The request is not an inbound e-mail in the provider's format; nothing was received.", 400)
        for event in events:
            try:
                inbound_email_receive(message=event.message, provider=self.esp_name.lower(), size=size)
            except DomainError as refusal:
                logger.warning("Inbound e-mail refused: %s", refusal)
                # 406: the provider does not retry a message no organisation receives.
                return _answer(str(refusal), 406)
        return HttpResponse()


class MailgunReceive(_Receive, MailgunInboundWebhookView):
    secret_setting = "ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY"


class PostmarkReceive(_Receive, PostmarkInboundWebhookView):
    secret_setting = "ANYMAIL_WEBHOOK_SECRET"


# SendGrid is not offered: django-anymail dropped official support for it (its inbound view warns on
# every request) and checks nothing but the URL's basic auth (ADR 0034, addendum).
PROVIDERS = {"mailgun": MailgunReceive, "postmark": PostmarkReceive}


def _answer(text: str, status: int) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


@csrf_exempt
def inbound_email(request):
    """POST /inbound/email/: the view of the provider named by INBOUND_EMAIL_PROVIDER."""
    view_class = PROVIDERS.get(settings.INBOUND_EMAIL_PROVIDER)
    if view_class is None:
        logger.error("INBOUND_EMAIL_PROVIDER=%r is not one of %s.", settings.INBOUND_EMAIL_PROVIDER, sorted(PROVIDERS))
        return _answer("E-mail intake is not configured; nothing was received.", 403)
    return view_class.as_view()(request)
