"""Thin Celery tasks of the outbox (they take ids, import the service lazily and call it)."""

from __future__ import annotations

from celery import shared_task


# Safe to run twice or concurrently: each row is claimed with a compare-and-set before it is published.
@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=60)
def outbox_relay_task(self) -> str:
    from outbox.services import outbox_relay_or_raise

    # An unreachable broker raises: one warning per outage (core.outages.OutageLogFilter), not one per row.
    return str(outbox_relay_or_raise())
