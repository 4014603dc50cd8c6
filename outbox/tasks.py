"""Thin Celery tasks of the outbox (they take ids and call the service)."""

from __future__ import annotations

from celery import shared_task

from outbox.services import outbox_relay_or_raise


# Safe to run twice or concurrently: each row is claimed with a compare-and-set before it is published.
@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def outbox_relay_task(self) -> str:
    # An unreachable broker raises: one warning per outage (core.outages.OutageLogFilter), not one per row.
    return str(outbox_relay_or_raise())
