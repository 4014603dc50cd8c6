"""Thin Celery tasks for integrations (take ids, call the service). Every task may
run twice: webhook_deliver claims its row with a compare-and-set, so a copy is a no-op."""

from __future__ import annotations

from celery import shared_task

from integrations.events import feed_assign
from integrations.idempotency import idempotency_purge_expired
from integrations.webhook_delivery import webhook_deliver, webhook_deliver_due


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=60, time_limit=90)
def webhook_deliver_task(delivery_id: int) -> bool:
    return webhook_deliver(delivery_id=delivery_id) is not None


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=240, time_limit=300)
def webhook_deliver_due_task() -> int:
    """Beat: deliveries whose time came (retries, rows written while the broker was down)."""
    feed_assign()
    return webhook_deliver_due()


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=120, time_limit=150)
def idempotency_purge_task() -> int:
    return idempotency_purge_expired()
