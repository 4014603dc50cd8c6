"""Email delivery with honest outcomes (ADR 0012).

A failed send is one of two things, and they must not be confused:

- FAILED — the message certainly did not go out (the server refused the connection, the sender or
  a recipient, or rejected the message with a final reply): it is retryable.
- UNKNOWN — the message data went out and no final reply came back (the connection dropped, the
  reply timed out): the server may have it and may deliver it. Retrying could deliver it twice, so
  it is never retried automatically; an operator settles it (mark sent with the Message-ID found
  in the mail log, or failed-and-retryable), or a provider's delivery webhook does.

`SmtpEmailBackend` is Django's SMTP backend instrumented to know which of the two happened: it
records when the server answered 354 to DATA (the message is about to go out) and whether the final
reply to the message arrived. For other backends, `send_outcome` classifies the exception
conservatively (a dropped connection or timeout of unknown phase is UNKNOWN).

Real providers: use django-anymail (EMAIL_BACKEND=anymail.backends.<esp>.EmailBackend). Notices
carry their id and Message-ID in anymail `metadata`; `settle_from_tracking_event` receives
anymail's `tracking` signal (the provider's delivery webhooks, at /anymail/<esp>/tracking/ once
anymail's URLs are included) and settles an `unknown` notice from a delivered/bounced event."""

from __future__ import annotations

import logging
import smtplib
import socket
from datetime import timedelta

from django.conf import settings
from django.core.mail.backends.smtp import EmailBackend as DjangoSmtpBackend
from django.utils import timezone

from cases.models import Notice, NoticeStatus
from core.actors import Actor
from core.errors import DomainError

logger = logging.getLogger(__name__)

SENT, FAILED, UNKNOWN = "sent", "failed", "unknown"


class EmailDeliveryUnknown(Exception):
    """The message data went out but no final reply came back: the server may have it."""


class _PhaseTracking:
    """Mixin for smtplib.SMTP: `awaiting_final_reply` is True from the server's 354 (go ahead with
    the message data) until its reply to the message itself arrives."""

    awaiting_final_reply = False
    message_data_started = False

    def data(self, msg):
        self.awaiting_final_reply = False
        return super().data(msg)

    def getreply(self):
        code, message = super().getreply()
        if self.awaiting_final_reply:
            self.awaiting_final_reply = False  # the final reply arrived (250 or a refusal)
        elif code == 354:
            self.awaiting_final_reply = True
            self.message_data_started = True
        return code, message


class _TrackingSMTP(_PhaseTracking, smtplib.SMTP):
    pass


class _TrackingSMTP_SSL(_PhaseTracking, smtplib.SMTP_SSL):
    pass


class SmtpEmailBackend(DjangoSmtpBackend):
    """Django's SMTP backend that raises EmailDeliveryUnknown when the connection fails after the
    message data went out and before the server's final reply; any other failure is raised as is
    and is a definite "not sent". Use it as EMAIL_BACKEND=cases.email_delivery.SmtpEmailBackend."""

    reports_delivery_phase = True

    @property
    def connection_class(self):
        return _TrackingSMTP_SSL if self.use_ssl else _TrackingSMTP

    def _send(self, email_message):
        try:
            return super()._send(email_message)
        except Exception as exc:
            connection = self.connection
            if connection is not None and getattr(connection, "awaiting_final_reply", False):
                raise EmailDeliveryUnknown(
                    f"The message data was sent but the server's final reply never came ({type(exc).__name__}: "
                    f"{exc}); the server may have accepted it.") from exc
            raise


# Exceptions that prove the message did not go out, whatever the backend.
_DEFINITELY_NOT_SENT = (smtplib.SMTPConnectError, smtplib.SMTPHeloError, smtplib.SMTPAuthenticationError,
                        smtplib.SMTPSenderRefused, smtplib.SMTPRecipientsRefused, smtplib.SMTPDataError,
                        smtplib.SMTPNotSupportedError, ConnectionRefusedError, socket.gaierror)


def send_outcome(exc: BaseException, connection) -> str:
    """FAILED (certainly not sent, retryable) or UNKNOWN (may have been sent) for a send error."""
    if isinstance(exc, EmailDeliveryUnknown):
        return UNKNOWN
    if getattr(connection, "reports_delivery_phase", False):
        return FAILED  # the backend knows the phase and did not say "unknown"
    if isinstance(exc, _DEFINITELY_NOT_SENT):
        return FAILED
    if type(exc).__module__.startswith("anymail"):
        # The provider answered with an error status: it refused the message. No answer at all (a
        # timeout, a dropped connection) may mean it took it — unless the connection never opened.
        if getattr(exc, "status_code", None) is not None:
            return FAILED
        cause = exc.__cause__
        if cause is not None and type(cause).__name__ in ("ConnectTimeout", "NewConnectionError"):
            return FAILED
        return UNKNOWN
    if isinstance(exc, (smtplib.SMTPServerDisconnected, smtplib.SMTPResponseException, OSError)):
        return UNKNOWN  # a backend that cannot tell the phase: assume the worst for exactly-once
    return FAILED  # raised before talking to anybody (a bad address or header, a programming error)


def notices_unsettled(*, tenant_id: int | None = None, now=None):
    """Notices whose delivery an operator must settle: `unknown` ones, and `sending` ones whose
    dispatch started more than ARBITER_NOTICE_SENDING_STUCK_SECONDS ago (their worker died)."""
    from django.db.models import Q


    stuck_before = (now or timezone.now()) - timedelta(seconds=settings.ARBITER_NOTICE_SENDING_STUCK_SECONDS)
    notices = Notice.objects.filter(Q(status=NoticeStatus.UNKNOWN) | Q(status=NoticeStatus.SENDING,
                                                                       updated_at__lt=stuck_before))
    if tenant_id is not None:
        notices = notices.filter(tenant_id=tenant_id)
    return notices.select_related("case", "dispatch").order_by("updated_at", "id")


# --- django-anymail tracking webhooks ----------------------------------------------------------

# Provider events that settle an unknown notice, by anymail's normalised event type.
TRACKING_SENT = frozenset({"queued", "sent", "delivered", "opened", "clicked"})
TRACKING_FAILED = frozenset({"rejected", "failed", "bounced"})


def settle_from_tracking_event(sender=None, event=None, esp_name: str = "", **kwargs) -> str:
    """Receiver of anymail.signals.tracking: a provider's event about a notice's email settles it
    when the notice is `unknown` (or stuck `sending`). The notice is found by the metadata
    notice_dispatch attaches (arbiter_notice_id, arbiter_message_id). Returns what it did (for
    tests and logs); never raises into the webhook (anymail would answer the provider 500 and it
    would retry forever): a refusal is logged."""
    from cases.services.dispatch import notice_settle

    metadata = getattr(event, "metadata", None) or {}
    notice_id = metadata.get("arbiter_notice_id")
    event_type = getattr(event, "event_type", "")
    if not notice_id:
        return "ignored:not-a-notice"
    if event_type in TRACKING_SENT:
        outcome = SENT
    elif event_type in TRACKING_FAILED:
        outcome = FAILED
    else:
        return f"ignored:{event_type}"
    notice = Notice.objects.filter(pk=notice_id).first()
    if notice is None or str(metadata.get("arbiter_message_id", "")) != getattr(
            getattr(notice, "dispatch", None), "message_id", None):
        logger.warning("anymail %s event %s names notice %s with a Message-ID that does not match; ignored",
                       esp_name, event_type, notice_id)
        return "ignored:no-match"
    if notice.status not in (NoticeStatus.UNKNOWN, NoticeStatus.SENDING):
        return f"ignored:{notice.status}"
    reason = (f"{esp_name or 'provider'} webhook: {event_type}"
              + (f" ({event.description or event.mta_response})" if (getattr(event, "description", None)
                                                                      or getattr(event, "mta_response", None))
                 else ""))
    try:
        notice_settle(actor=Actor.system(f"anymail-{(esp_name or 'esp').lower()}"), notice=notice, outcome=outcome,
                      reason=reason[:500], message_id=str(getattr(event, "message_id", "") or ""),
                      stuck_check=False)
    except DomainError as exc:
        logger.warning("anymail %s event for notice %s not applied: %s", esp_name, notice_id, exc.message)
        return f"refused:{exc.code}"
    return f"settled:{outcome}"
