"""Celery tasks of the reports app: thin, and safe to run twice (a refresh rebuilds the same facts)."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from reports.services import dashboard_refresh_all


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=30, retry_jitter=False, max_retries=5)
def dashboard_refresh_task() -> int:
    """Rebuild every tenant's dashboard facts (beat, every ARBITER_DASHBOARD_REFRESH_SECONDS)."""
    return dashboard_refresh_all()
