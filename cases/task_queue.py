"""How the cases services queue their Celery tasks: through the transactional outbox, by the task's
name, in the caller's transaction. The tasks themselves (cases.tasks) call the services, so they sit
above them; this module imports neither."""

from __future__ import annotations

from outbox.services import outbox_enqueue


def evidence_extract_enqueue(*, evidence_id: int) -> None:
    """Queue the extraction through the transactional outbox, in the upload's transaction: a broker
    outage delays the extraction instead of losing it (the relay publishes the row later)."""

    outbox_enqueue(task="cases.tasks.evidence_extract_task", kwargs={"evidence_id": evidence_id},
                   dedupe_key=f"evidence-extract:{evidence_id}")


def notice_dispatch_enqueue(*, notice_id: int, actor_user_id: int | None = None,
                            dedupe_key: str | None = None) -> None:
    """Queue the dispatch through the transactional outbox (call it inside the transaction that
    approved or requested it): a worker never picks up a notice whose approval has not been
    committed, a rolled-back approval queues nothing, and a broker outage delays the send instead of
    losing it (the relay publishes the row when the broker is back)."""

    outbox_enqueue(task="cases.tasks.notice_dispatch_task",
                   kwargs={"notice_id": notice_id, "actor_user_id": actor_user_id}, dedupe_key=dedupe_key)
