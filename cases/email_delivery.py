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
carry their id and Message-ID in anymail `metadata`; `settle_from_tracking_event`
(cases.delivery_tracking) receives
anymail's `tracking` signal (the provider's delivery webhooks, at /anymail/<esp>/tracking/ once
anymail's URLs are included) and settles an `unknown` notice from a delivered/bounced event."""

from __future__ import annotations

import smtplib
import socket
from datetime import timedelta

from django.conf import settings
from django.core.mail.backends.smtp import EmailBackend as DjangoSmtpBackend
from django.utils import timezone

from cases.models import Notice, NoticeStatus

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
