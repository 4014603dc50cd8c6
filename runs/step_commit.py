"""The steady-state step commit in one statement (ADR 0010, ADR 0024).

When a worker goes on with a run whose lease it kept at its previous commit, and the step wrote
nothing but its own rows (no model calls, tool calls, findings, artifacts, on_commit writes) and
no audit listener acts on `runs.step.completed` events (audit.hooks), the whole commit — the run
row's conditional UPDATE, the Step, the Checkpoint and the step's audit event — is ONE statement,
its own transaction: one round trip, one durable commit, no lock wait on the audit head.

The audit event is appended by compare-and-set on the stream head this process last wrote
(audit.services.audit_head_guess), so no lock is waited for: if anyone else appended to the
stream, or anything about the run row is not as this worker left it, the statement writes
nothing (each row it writes depends on the one before; no error is raised on purpose), and the
executor commits the step the ordinary way (one
transaction that locks the head and tells a lost lease, a cancellation and a moved row apart).
The hash chain is the one audit_record writes: the same event, the same keyed hash over the same
fields. It pays for itself: ~2× the steps per second of the ordinary commit at one process
(bench/RESULTS.md, ADR 0024).
"""

from __future__ import annotations

import logging

from django.db import DEFAULT_DB_ALIAS, connections

from audit import hooks
from audit.services import audit_event_values, audit_head_guess, audit_head_remember, stream_for
from cases import policy
from core.actors import Actor
from runs.models import AgentRun, RunStatus
from runs.step_sql import StepCommitRefused, step_commit_with_event

logger = logging.getLogger(__name__)

STEP_COMPLETED = "runs.step.completed"


def commit_in_one_statement(*, run: AgentRun, worker_id: str, ctx, values: dict, step: dict, checkpoint: dict,
                            event_payload: dict) -> bool:
    """Commit a steady-state step in one statement if it can be; True when it is committed, False
    when nothing was written and the caller must commit it the ordinary way."""
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: each access through the proxy costs
    if db.vendor != "postgresql" or db.in_atomic_block or not db.get_autocommit():
        return False  # the statement is its own transaction: never part of a caller's
    if hooks.has_listener_for(STEP_COMPLETED):
        return False  # a listener writes in the event's transaction: that needs audit_record
    stream = stream_for(tenant_id=run.tenant_id, case_id=run.case_id)
    head = audit_head_guess(stream)
    if head is None:
        return False
    head_id, last_sequence, last_hash = head
    event = audit_event_values(tenant_id=run.tenant_id, stream=stream, sequence=last_sequence + 1,
                              prev_hash=last_hash, actor_type=Actor.AGENT, actor_id=ctx.actor.identifier,
                              action=STEP_COMPLETED, target_type="run", target_id=run.pk, run_id=str(run.pk),
                              policy_version=policy.POLICY_VERSION, decision="", payload=event_payload)
    try:
        step_commit_with_event(db, run_id=run.pk, worker_id=worker_id, sequence=ctx.sequence,
                               status=RunStatus.RUNNING, version=run.version, values=values, step=step,
                               checkpoint=checkpoint, event=event, head=head)
    except StepCommitRefused as refused:
        audit_head_remember(stream, None)
        logger.info("run %s step %s: one-statement commit refused (%s); committing it the ordinary way",
                    run.pk, ctx.sequence, refused)
        return False
    audit_head_remember(stream, (head_id, event["sequence"], event["hash"]))
    return True
