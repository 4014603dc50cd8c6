"""What the run engine records and sends about a run beside a step's own rows: the run's audit
events, and the hand-off of its next step to the broker. Shared by admission, the executor and the
step endings, and importing none of them.

The step is sent through runs.tasks.enqueue_step, the one place the runs app talks to the broker.
That module holds the Celery tasks, which call the executor, so it sits above the engine: it is
registered here in RunsConfig.ready() (STEP_SENDER) instead of being imported."""

from __future__ import annotations

import logging
from collections.abc import Callable

from audit.services import audit_record
from cases import policy
from core.actors import Actor
from core.slots import Slot
from runs.models import AgentRun

logger = logging.getLogger(__name__)

# enqueue_step(run_id, *, expected_sequence, countdown): filled in RunsConfig.ready().
STEP_SENDER: Slot[Callable[..., None]] = Slot("the run step sender (runs.tasks.enqueue_step)")


def enqueue_next_step(run_id: int, *, expected_sequence: int | None = None, countdown: int = 0) -> None:
    """Send a step to the broker (after commit). A broker error is logged, not raised: the step is
    already durable as the run row's hand-off deadline, and the reaper re-enqueues it once that
    passes (the run row is the outbox, runs.leases)."""
    sender = STEP_SENDER.get()  # outside the try: a missing registration is a bug, not an outage
    try:
        sender(run_id, expected_sequence=expected_sequence, countdown=countdown)
    except Exception:
        logger.warning("could not enqueue step of run %s; the reaper will re-enqueue it", run_id, exc_info=True)


def audit_run_event(run: AgentRun, *, action: str, actor_type: str = Actor.AGENT, actor_id: str | None = None,
           decision: str = "", payload: dict | None = None) -> None:
    audit_record(tenant_id=run.tenant_id, case_id=run.case_id, actor_type=actor_type,
                 actor_id=actor_id or run.audit_actor_id, action=action, target_type="run", target_id=run.pk,
                 run_id=str(run.pk), policy_version=policy.POLICY_VERSION, decision=decision, payload=payload or {})
