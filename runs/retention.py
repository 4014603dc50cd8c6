"""Retention (ADR 0005): purge execution state that outlived its setting, and say so in
the audit log.

- checkpoints (ARBITER_RETENTION_CHECKPOINT_DAYS): the intermediate checkpoints of finished runs
  older than N days are deleted. Kept: the final checkpoint (given a full snapshot if its delta
  chain loses a row, so it still loads), every checkpoint a fork was made from, and every newer
  one — each kept checkpoint still loads to the state it recorded.
- model-call content (ARBITER_RETENTION_MODEL_CONTEXT_DAYS): the messages, context, raw and
  validated output and error of model calls of finished runs older than N days are blanked. Kept:
  the row (agent, provider/model, tokens, latency, source refs), `purged_at` and the sha256 of what
  was removed, so "what did the agent see" answers "purged on <date> (sha256 …)".
- memory (ARBITER_RETENTION_MEMORY_DAYS): records that expired, or were rejected or forgotten,
  more than N days ago are deleted.
0 days keeps that kind forever.

Never touched: audit events, case events, evidence, messages, steps, findings, artifacts, tool
calls, and any run that is not finished (queued, running, waiting): it is being worked on or waits
for a person.

`retention_purge` works tenant by tenant. Each tenant's purge is ONE transaction that holds its
changes and the one audit event recording their counts (`runs.retention.purged`, actor
system:retention), so a purge that dies half-way leaves nothing purged and unrecorded; the next one
does it again. Rows are read in pages of ARBITER_RETENTION_BATCH_SIZE (bounded memory, not a bounded
transaction). Beside running workers and a concurrent copy of itself it is safe because:
  - it only picks finished runs and re-checks that under the run's row lock (FOR NO KEY UPDATE, the
    lock run_resume and the executor take), so a failed run being resumed is either purged before
    the resume or left alone;
  - rows another purge holds are skipped (SKIP LOCKED) and every write is conditional (a checkpoint
    that is gone is not deleted twice, a model call already purged is not purged again), so each row
    is counted by exactly one purge;
  - running it twice purges nothing the second time (nothing matches any more).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.deletion import ProtectedError
from django.utils import timezone

from accounts.models import Tenant
from audit.services import audit_record
from cases import policy
from core.actors import Actor
from core.errors import NotFound
from core.hashing import canonical_json, sha256_hex
from runs.models import (
    AgentRun,
    Checkpoint,
    MemoryRecord,
    MemoryStatus,
    ModelCall,
    RunStatus,
    Step,
    StepStatus,
)
from runs.state import RunState, apply_delta, state_hash_matches, upgrade
from runs.state_load import load_chain

logger = logging.getLogger(__name__)

ACTOR = Actor.system("retention")
AUDIT_ACTION = "runs.retention.purged"
# What one purge reports, per tenant and in total.
COUNT_KEYS = ("checkpoints", "snapshots_written", "runs", "model_calls", "memory_records", "runs_skipped")
# The counts that mean something was removed (an audit event is written only then).
PURGED_KEYS = ("checkpoints", "model_calls", "memory_records")
# The model-call fields whose content is removed (the sha256 covers exactly these, in this shape).
MODEL_CALL_CONTENT_FIELDS = ("messages", "context", "raw_output", "validated_output", "error")
MODEL_CALL_BLANK = {"messages": [], "context": {}, "raw_output": "", "validated_output": None, "error": ""}


@dataclass(frozen=True)
class Cutoffs:
    """Rows older than these are expired; None = that kind is kept forever (its setting is 0)."""

    checkpoints: datetime | None
    model_calls: datetime | None
    memory: datetime | None

    @classmethod
    def at(cls, now: datetime) -> Cutoffs:
        def cutoff(days: int) -> datetime | None:
            return now - timedelta(days=days) if days > 0 else None

        return cls(checkpoints=cutoff(settings.ARBITER_RETENTION_CHECKPOINT_DAYS),
                   model_calls=cutoff(settings.ARBITER_RETENTION_MODEL_CONTEXT_DAYS),
                   memory=cutoff(settings.ARBITER_RETENTION_MEMORY_DAYS))

    @property
    def is_off(self) -> bool:
        return self.checkpoints is None and self.model_calls is None and self.memory is None

    def as_dict(self) -> dict:
        return {name: value.isoformat() if value else None
                for name, value in (("checkpoints", self.checkpoints), ("model_calls", self.model_calls),
                                    ("memory", self.memory))}


def _batch_size() -> int:
    return settings.ARBITER_RETENTION_BATCH_SIZE


def retention_purge(*, now: datetime | None = None, dry_run: bool = False,
                    on_tenant: Callable[[Tenant, dict[str, int] | None], None] | None = None) -> dict[str, int]:
    """Purge what has expired in every tenant; return the totals (COUNT_KEYS, plus `tenants`: how
    many had something purged, and `tenants_failed`).

    Per tenant, one transaction: the checkpoints, model-call contents and memory records it purges
    and one `runs.retention.purged` audit event with the counts (none when nothing was purged). A
    tenant whose purge fails (a database error) is rolled back, logged and counted in
    `tenants_failed`; the others go on. `dry_run` counts what would be purged and writes nothing
    (no lock, no audit event). `on_tenant(tenant, counts)` is called after each tenant (counts None
    when it failed) — manage.py purge_expired prints them."""
    now = now or timezone.now()
    cutoffs = Cutoffs.at(now)
    totals = dict.fromkeys(COUNT_KEYS, 0) | {"tenants": 0, "tenants_failed": 0}
    if cutoffs.is_off:
        return totals
    for tenant in Tenant.objects.order_by("pk"):
        try:
            counts = _purge_tenant(tenant=tenant, now=now, cutoffs=cutoffs, dry_run=dry_run)
        except DatabaseError:
            logger.exception("retention purge of tenant %s failed; it was rolled back and is retried next time",
                             tenant.slug)
            totals["tenants_failed"] += 1
            if on_tenant is not None:
                on_tenant(tenant, None)
            continue
        for key in COUNT_KEYS:
            totals[key] += counts[key]
        totals["tenants"] += int(has_purged(counts))
        if on_tenant is not None:
            on_tenant(tenant, counts)
    return totals


def has_purged(counts: dict[str, int]) -> bool:
    return any(counts.get(key) for key in PURGED_KEYS)


def _purge_tenant(*, tenant: Tenant, now: datetime, cutoffs: Cutoffs, dry_run: bool) -> dict[str, int]:
    counts = dict.fromkeys(COUNT_KEYS, 0)
    with transaction.atomic():
        if cutoffs.checkpoints is not None:
            _purge_checkpoints(tenant_id=tenant.pk, cutoff=cutoffs.checkpoints, now=now, counts=counts,
                               dry_run=dry_run)
        if cutoffs.model_calls is not None:
            _purge_model_calls(tenant_id=tenant.pk, cutoff=cutoffs.model_calls, now=now, counts=counts,
                               dry_run=dry_run)
        if cutoffs.memory is not None:
            _purge_memory(tenant_id=tenant.pk, cutoff=cutoffs.memory, counts=counts, dry_run=dry_run)
        if not dry_run and has_purged(counts):
            # Written last: the tenant's audit stream head is locked only for the end of the purge.
            audit_record(
                tenant_id=tenant.pk, actor_type=ACTOR.kind, actor_id=ACTOR.identifier, action=AUDIT_ACTION,
                target_type="tenant", target_id=tenant.pk, policy_version=policy.POLICY_VERSION, decision="purged",
                payload={"counts": counts, "cutoffs": cutoffs.as_dict(), "days": {
                    "checkpoints": settings.ARBITER_RETENTION_CHECKPOINT_DAYS,
                    "model_calls": settings.ARBITER_RETENTION_MODEL_CONTEXT_DAYS,
                    "memory": settings.ARBITER_RETENTION_MEMORY_DAYS}})
    return counts


# --- checkpoints ----------------------------------------------------------------------------------

def _runs_with_purgeable_checkpoints(*, tenant_id: int, cutoff: datetime):
    """Finished runs of the tenant with a checkpoint older than `cutoff` that is neither their last
    one nor one a fork was made from. A run purged before no longer matches, so the daily job
    revisits only runs with new work."""
    last_sequence = Checkpoint.objects.filter(run=OuterRef("run")).order_by("-sequence").values("sequence")[:1]
    fork_points = AgentRun.objects.filter(tenant_id=tenant_id, forked_from_checkpoint__isnull=False).values(
        "forked_from_checkpoint")
    purgeable = (Checkpoint.objects.filter(run=OuterRef("pk"), created_at__lt=cutoff)
                 .exclude(sequence=last_sequence).exclude(pk__in=fork_points))
    return AgentRun.objects.filter(tenant_id=tenant_id, status__in=RunStatus.terminal()).filter(Exists(purgeable))


def _purge_checkpoints(*, tenant_id: int, cutoff: datetime, now: datetime, counts: dict, dry_run: bool) -> None:
    candidates = _runs_with_purgeable_checkpoints(tenant_id=tenant_id, cutoff=cutoff)
    last_pk = 0
    while True:
        run_ids = list(candidates.filter(pk__gt=last_pk).order_by("pk").values_list("pk", flat=True)[:_batch_size()])
        if not run_ids:
            return
        last_pk = run_ids[-1]
        for run_id in run_ids:
            _purge_run_checkpoints(run_id=run_id, cutoff=cutoff, now=now, counts=counts, dry_run=dry_run)


@dataclass
class CheckpointPlan:
    delete: list[int]  # checkpoint pks
    snapshots: dict[int, dict]  # checkpoint pk -> the full state to store as its snapshot
    final_hash: str  # the hash of the final state (current schema), to check after the purge


class ChainMismatch(Exception):
    """A run's checkpoints do not replay to the state hashes they recorded: leave the run alone."""


def plan_checkpoint_purge(rows: list[dict], *, fork_points: set[int], cutoff: datetime) -> CheckpointPlan:
    """Which of a run's checkpoints to delete and which kept ones need a full snapshot.

    `rows` are the run's checkpoints in sequence order (pk, sequence, schema_version, delta,
    snapshot, state_hash, created_at). Deleted: every one older than `cutoff` except the last and
    the fork points. Every kept checkpoint must still load: walking the chain, the first kept delta
    after a deleted row gets a snapshot of its state (as it was written, in its own schema version,
    so later deltas of that version still apply to it); the ones after it chain from it. Raises
    ChainMismatch when replaying the chain does not give each row's recorded state hash — then
    nothing may be deleted."""
    states: dict[int, dict] = {}
    state: dict | None = None
    for row in rows:
        if row["snapshot"] is not None:
            state = copy.deepcopy(row["snapshot"])
        elif state is None:
            raise ChainMismatch(f"checkpoint {row['sequence']} has no snapshot before it")
        else:
            state = apply_delta(upgrade(state, to_version=row["schema_version"]), row["delta"])
        if not state_hash_matches(state, row["state_hash"]):  # either hash format (ADR 0010)
            raise ChainMismatch(f"checkpoint {row['sequence']} does not replay to its recorded state hash")
        states[row["pk"]] = state
    last = rows[-1]
    delete = [row["pk"] for row in rows[:-1] if row["created_at"] < cutoff and row["pk"] not in fork_points]
    snapshots: dict[int, dict] = {}
    chain_broken = False
    deleted = set(delete)
    for row in rows:
        if row["pk"] in deleted:
            chain_broken = True
        elif row["snapshot"] is not None:
            chain_broken = False
        elif chain_broken:
            snapshots[row["pk"]] = states[row["pk"]]
            chain_broken = False
    try:
        final_hash = RunState.model_validate(upgrade(states[last["pk"]])).hash()
    except ValueError as exc:  # pydantic's ValidationError, SchemaUpgradeError
        raise ChainMismatch(f"the final checkpoint does not load: {exc}") from exc
    return CheckpointPlan(delete=delete, snapshots=snapshots, final_hash=final_hash)


def _purge_run_checkpoints(*, run_id: int, cutoff: datetime, now: datetime, counts: dict, dry_run: bool) -> None:
    runs = AgentRun.objects.filter(pk=run_id, status__in=RunStatus.terminal())
    if not dry_run:
        # The run's row lock (the one run_resume and the executor take): a failed run cannot be
        # resumed half-way through its purge, and the status re-checked here is the current one.
        # SKIP LOCKED: a run another purge (or a resume) holds is left to it.
        runs = runs.select_for_update(no_key=True, skip_locked=True)
    run = runs.only("pk", "tenant_id").first()
    if run is None:
        return
    rows = list(Checkpoint.objects.filter(run_id=run_id).order_by("sequence").values(
        "pk", "sequence", "schema_version", "delta", "snapshot", "state_hash", "created_at"))
    if len(rows) < 2:
        return
    fork_points = set(AgentRun.objects.filter(forked_from_checkpoint__run_id=run_id).values_list(
        "forked_from_checkpoint_id", flat=True))
    try:
        plan = plan_checkpoint_purge(rows, fork_points=fork_points, cutoff=cutoff)
        if not plan.delete:
            return
        if dry_run:
            deleted, written = len(plan.delete), len(plan.snapshots)
        else:
            deleted, written = _apply_checkpoint_plan(run=run, plan=plan, now=now)
    except (ChainMismatch, ProtectedError) as exc:
        logger.warning("retention: the checkpoints of run R%s are kept whole: %s", run_id, exc)
        counts["runs_skipped"] += 1
        return
    counts["checkpoints"] += deleted
    counts["snapshots_written"] += written
    counts["runs"] += 1


def _apply_checkpoint_plan(*, run: AgentRun, plan: CheckpointPlan, now: datetime) -> tuple[int, int]:
    # A savepoint: a run whose purge goes wrong is put back alone, the tenant's purge goes on.
    with transaction.atomic():
        written = 0
        for pk, snapshot in plan.snapshots.items():
            written += Checkpoint.objects.filter(pk=pk, snapshot__isnull=True).update(
                snapshot=snapshot, size_bytes=F("size_bytes") + len(json.dumps(snapshot, default=str)))
        # PROTECT on AgentRun.forked_from_checkpoint makes Django refuse to delete a fork point even
        # if a fork was made from it since we read them (ProtectedError: this run is left whole).
        deleted, _per_model = Checkpoint.objects.filter(pk__in=plan.delete, run_id=run.pk).delete()
        try:
            # Read whole (not trusting the digests compactions recorded): every stored item must be there.
            final_hash = RunState.model_validate(load_chain(run, lazy=False)[0]).hash()
        except (LookupError, ValueError) as exc:
            raise ChainMismatch(f"after the purge the final state would not load ({exc}); nothing was purged") \
                from exc
        if final_hash != plan.final_hash:  # never leave a run whose final state changed
            raise ChainMismatch("after the purge the final state would differ; nothing was purged")
        AgentRun.objects.filter(pk=run.pk).update(checkpoints_purged_at=now)
    return deleted, written


class CheckpointPurged(NotFound):
    """The checkpoint asked for was removed by retention (the run's final state is kept)."""


def _purged_on(run_id: int) -> datetime | None:
    """When retention purged this run's checkpoints, or (for a fork made afterwards, which copied
    what was left) its parent's. Read fresh: the caller's instance may predate the purge."""
    for _ in range(20):  # forks of forks; the chain is short
        row = AgentRun.objects.filter(pk=run_id).values_list("checkpoints_purged_at", "parent_run_id").first()
        if row is None:
            return None
        purged_at, parent_id = row
        if purged_at is not None or parent_id is None:
            return purged_at
        run_id = parent_id
    return None


def checkpoint_purged_check(*, run: AgentRun, sequence: int, loaded: int | None) -> None:
    """Raise CheckpointPurged when the state after step `sequence` cannot be shown because
    retention deleted its checkpoint. `loaded` is the sequence of the checkpoint the state would
    come from (None: there is none at or before `sequence`).

    Every completed step left a checkpoint and failed steps none, so the state after `sequence`
    belongs to the last completed step at or before it (0 = the start). If the checkpoint found is
    older than that, the one in between is gone: showing the older state in its place would be
    wrong. One query, and only when the checkpoint found is not the one asked for."""
    expected = (Step.objects.filter(run=run, sequence__lte=sequence, status=StepStatus.COMPLETED)
                .order_by("-sequence").values_list("sequence", flat=True).first()) or 0
    if loaded is not None and loaded >= expected:
        return
    purged_on = _purged_on(run.pk)
    when = f" on {timezone.localtime(purged_on):%Y-%m-%d}" if purged_on else ""
    raise CheckpointPurged(
        f"The checkpoint after step {sequence} of run R{run.pk} was purged{when} by the retention policy "
        f"(ARBITER_RETENTION_CHECKPOINT_DAYS). The run's steps, findings and artifacts, its final state and the "
        f"checkpoints forks were made from are kept; the audit log records the purge.")


# --- model calls ----------------------------------------------------------------------------------

def model_call_content(call: ModelCall) -> dict:
    """What retention removes from a model call; `purged_sha256` = sha256(canonical_json(this))."""
    return {name: getattr(call, name) for name in MODEL_CALL_CONTENT_FIELDS}


def model_call_content_sha256(call: ModelCall) -> str:
    return sha256_hex(canonical_json(model_call_content(call)))


def _purge_model_calls(*, tenant_id: int, cutoff: datetime, now: datetime, counts: dict, dry_run: bool) -> None:
    finished = AgentRun.objects.filter(tenant_id=tenant_id, status__in=RunStatus.terminal()).values("pk")
    expired = ModelCall.objects.filter(run_id__in=finished, created_at__lt=cutoff, purged_at__isnull=True)
    last_pk = 0
    while True:
        page = expired.filter(pk__gt=last_pk).order_by("pk").only("pk", *MODEL_CALL_CONTENT_FIELDS)
        if not dry_run:
            # Rows another purge holds are its to count; the UPDATE below re-checks purged_at anyway.
            page = page.select_for_update(no_key=True, skip_locked=True)
        calls = list(page[:_batch_size()])
        if not calls:
            return
        last_pk = calls[-1].pk
        for call in calls:
            if dry_run:
                counts["model_calls"] += 1
                continue
            counts["model_calls"] += ModelCall.objects.filter(pk=call.pk, purged_at__isnull=True).update(
                **MODEL_CALL_BLANK, purged_at=now, purged_sha256=model_call_content_sha256(call))


# --- memory -----------------------------------------------------------------------------------------

def _expired_memory(*, tenant_id: int, cutoff: datetime):
    return MemoryRecord.objects.filter(tenant_id=tenant_id).filter(
        Q(expires_at__lt=cutoff)
        | Q(status__in=[MemoryStatus.REJECTED, MemoryStatus.FORGOTTEN], decided_at__lt=cutoff))


def _purge_memory(*, tenant_id: int, cutoff: datetime, counts: dict, dry_run: bool) -> None:
    """Expired memory is deleted, not blanked: nothing references a memory record by key (model
    calls and tool calls keep its id as data, the audit log its id, subject and status), an empty
    record would break the model's own rule that a memory has content, and an expired record can
    never be confirmed or enter a context again."""
    expired = _expired_memory(tenant_id=tenant_id, cutoff=cutoff)
    last_pk = 0
    while True:
        page = expired.filter(pk__gt=last_pk).order_by("pk")
        if not dry_run:
            page = page.select_for_update(skip_locked=True)
        ids = list(page.values_list("pk", flat=True)[:_batch_size()])
        if not ids:
            return
        last_pk = ids[-1]
        if dry_run:
            counts["memory_records"] += len(ids)
            continue
        # Re-filtered, so a record is deleted only if it still qualifies; the row count is what
        # this purge deleted.
        deleted, _per_model = expired.filter(pk__in=ids).delete()
        counts["memory_records"] += deleted
