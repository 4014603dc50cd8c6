"""django-anymail's tracking webhooks: a provider's delivery event settles a notice whose delivery is
unknown (cases.email_delivery explains the outcomes). Connected to anymail's `tracking` signal in
CasesConfig.ready(); it calls the dispatch service, which itself uses cases.email_delivery, so it is a
module of its own above both."""

from __future__ import annotations

import logging

from cases.email_delivery import FAILED, SENT
from cases.models import Notice, NoticeStatus
from cases.services.dispatch import notice_settle
from core.actors import Actor
from core.errors import DomainError

logger = logging.getLogger(__name__)

# Provider events that settle an unknown notice, by anymail's normalised event type.
TRACKING_SENT = frozenset({"queued", "sent", "delivered", "opened", "clicked"})
TRACKING_FAILED = frozenset({"rejected", "failed", "bounced"})


def settle_from_tracking_event(sender=None, event=None, esp_name: str = "", **kwargs) -> str:
    """Receiver of anymail.signals.tracking: a provider's event about a notice's email settles it
    when the notice is `unknown` (or stuck `sending`). The notice is found by the metadata
    notice_dispatch attaches (arbiter_notice_id, arbiter_message_id). Returns what it did (for
    tests and logs); never raises into the webhook (anymail would answer the provider 500 and it
    would retry forever): a refusal is logged."""
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
