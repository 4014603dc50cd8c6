"""Celery tasks of bulk intake: thin, they take an id and call the service."""

from __future__ import annotations

import logging

from celery import shared_task

from intake.services import complaint_import_claim, complaint_import_fail, complaint_import_run

logger = logging.getLogger(__name__)


# Longer limits than the default task's: a 100,000-row file takes minutes. A failure is recorded on
# the import and not retried: importing the file again finishes it (rows already in are skipped).
@shared_task(acks_late=True, soft_time_limit=3600, time_limit=3900)
def complaint_import_task(import_id: int) -> str:
    """Run a queued import. A duplicate delivery finds it taken or finished: a no-op."""
    complaint_import = complaint_import_claim(import_id=import_id)
    if complaint_import is None:
        logger.info("complaint_import_task: import %s is finished or running elsewhere; nothing to do", import_id)
        return "skipped"
    if not complaint_import.file:
        complaint_import_fail(import_id=import_id, reason="The import has no stored file to read.")
        return "failed"
    try:
        with complaint_import.file.open("rb") as stored:
            complaint_import_run(complaint_import=complaint_import, handle=getattr(stored.file, "file", stored.file))
    except Exception as error:
        logger.exception("complaint_import_task: import %s stopped", import_id)
        complaint_import_fail(import_id=import_id, reason=f"The import stopped on an unexpected error ({type(error).__name__}). "
                              "The rows imported so far are kept; import the file again to finish it.")
        return "failed"
    return "done"
