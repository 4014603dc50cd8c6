from celery import shared_task

from audit.anchors import anchor_write


@shared_task(ignore_result=True)
def audit_anchor_task() -> int:
    """Beat: a signed anchor of every stream head, outside the database (audit.anchors)."""

    return len(anchor_write().heads)
