"""Execution state (docs/architecture.md, "The run engine"): runs, steps, checkpoints, model calls, tool calls, artifacts,
findings and governed memory.

Only runs.executor, runs.tools and runs.services write these rows. AgentRun.status is a protected
FSM field: transitions change it in memory, the caller saves inside a transaction with the row
locked. Leases are taken with conditional UPDATEs (runs.executor), never by assigning fields on a
stale instance."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from cases.models import ThreadSafeRefreshMixin
from core.hashing import canonical_json, sha256_hex


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"

    @classmethod
    def unfinished(cls) -> list[str]:
        return [cls.QUEUED, cls.RUNNING, cls.WAITING]

    @classmethod
    def terminal(cls) -> list[str]:
        return [cls.COMPLETED, cls.FAILED, cls.CANCELLED]


class RunPhase(models.TextChoices):
    PLANNING = "planning", "Planning"
    EXECUTING = "executing", "Executing"
    REFLECTING = "reflecting", "Reflecting"
    DONE = "done", "Done"
    ERROR = "error", "Error"


# ThreadSafeRefreshMixin: django-fsm's own refresh_from_db lifts the protection of `status` for
# every thread while it reloads; with threads serving requests (gthread) or stepping runs, two
# refreshes at once raised AttributeError (found by the deadlock-mix test).
class AgentRun(ThreadSafeRefreshMixin, ConcurrentTransitionMixin, models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey("cases.Case", on_delete=models.PROTECT, null=True, blank=True, related_name="runs")
    thread = models.ForeignKey("conversations.Thread", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="runs")
    graph = models.CharField(max_length=60)
    graph_version = models.CharField(max_length=20, blank=True)
    input = models.JSONField(default=dict, blank=True)

    status = FSMField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED, protected=True)
    phase = models.CharField(max_length=20, choices=RunPhase.choices, default=RunPhase.PLANNING)
    current_node = models.CharField(max_length=60, blank=True)
    next_sequence = models.PositiveIntegerField(default=1, help_text="The sequence number of the next step.")
    retry_counts = models.JSONField(default=dict, blank=True)  # {"<sequence>": failed attempts so far}
    # No list of the completed nodes here: it grew with every step and PostgreSQL re-compressed it
    # on every step's UPDATE. The run's completed steps are its Step rows (runs.selectors).

    # Budgets and usage. Hitting one fails the run with the reason.
    max_steps = models.PositiveIntegerField()
    max_tokens = models.PositiveIntegerField()
    max_wall_seconds = models.PositiveIntegerField()
    steps_used = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveIntegerField(default=0)

    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    wait_reason = models.CharField(max_length=500, blank=True)

    started_by = models.CharField(max_length=200)  # actor identifier
    started_by_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True,
                                        blank=True, related_name="+")
    provider_name = models.CharField(max_length=60)
    model_name = models.CharField(max_length=200, blank=True)
    prompt_versions = models.JSONField(default=dict, blank=True)

    lease_owner = models.CharField(max_length=200, blank=True, null=True)
    # While owned: when the lease lapses. While free (between steps): the deadline by which the next
    # step should have claimed it; the reaper re-enqueues runs past either deadline.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=1)
    # The latest checkpoint as the executor committed it (ADR 0010): a worker that cached the state
    # of its previous step of this run uses it only while these still match; empty = unknown, load.
    state_sequence = models.PositiveIntegerField(null=True, blank=True)
    state_hash = models.CharField(max_length=64, blank=True)

    parent_run = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="forks")
    forked_from_checkpoint = models.ForeignKey("Checkpoint", on_delete=models.PROTECT, null=True, blank=True,
                                               related_name="+")
    # Set by runs.retention when it removed this finished run's intermediate checkpoints (its final
    # checkpoint and those forks were made from stay, loadable). Written with a conditional UPDATE
    # under the run's row lock; the executor only ever saves run rows it locked and re-read.
    checkpoints_purged_at = models.DateTimeField(null=True, blank=True)

    queued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "status", "queued_at"]),
            models.Index(fields=["status", "lease_expires_at"]),
            models.Index(fields=["thread", "status"]),
        ]

    def __str__(self) -> str:
        return f"R{self.pk} {self.graph} {self.status}"

    @property
    def is_finished(self) -> bool:
        return self.status in RunStatus.terminal()

    @property
    def audit_actor_id(self) -> str:
        return f"agent:{self.graph}@{self.graph_version or '1'}"

    # --- lifecycle (docs/architecture.md, "Lifecycles"); in memory only, the executor/services save under a row lock ---
    @transition(field=status, source=RunStatus.QUEUED, target=RunStatus.RUNNING)
    def admit(self):
        pass

    @transition(field=status, source=RunStatus.RUNNING, target=RunStatus.WAITING)
    def wait(self):
        pass

    @transition(field=status, source=RunStatus.RUNNING, target=RunStatus.COMPLETED)
    def complete(self):
        pass

    @transition(field=status, source=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING],
                target=RunStatus.FAILED)
    def fail(self):
        pass

    @transition(field=status, source=[RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING],
                target=RunStatus.CANCELLED)
    def cancel(self):
        pass

    @transition(field=status, source=[RunStatus.WAITING, RunStatus.FAILED], target=RunStatus.QUEUED)
    def requeue(self):
        pass


class StepStatus(models.TextChoices):
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


class Step(models.Model):
    """One executed node. Unique per (run, sequence): a step commits at most once, whatever the
    number of deliveries or workers."""

    # No index of its own: the unique (run, sequence) constraint's index leads with it (ADR 0010).
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="steps", db_index=False)
    sequence = models.PositiveIntegerField()
    node = models.CharField(max_length=60)
    attempt = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=20, choices=StepStatus.choices)
    outcome = models.CharField(max_length=20, blank=True)  # goto | end | wait | failed
    next_node = models.CharField(max_length=60, blank=True)
    summary = models.TextField(blank=True)
    error = models.TextField(blank=True)
    worker_id = models.CharField(max_length=200, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    copied_from = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+",
                                    db_index=False,
                                    help_text="For a fork: the parent's step this one reproduces.")

    class Meta:
        ordering = ["run_id", "sequence"]
        constraints = [models.UniqueConstraint(fields=["run", "sequence"], name="step_sequence_unique_per_run")]
        # Only fork copies set copied_from: a partial index is not written by an executed step.
        indexes = [models.Index(fields=["copied_from"], condition=models.Q(copied_from__isnull=False),
                                name="runs_step_copied_from_set")]

    def __str__(self) -> str:
        return f"R{self.run_id}#{self.sequence} {self.node} {self.status}"


class Checkpoint(models.Model):
    """The run's task state after a step: a delta of what the step changed; the initial checkpoint
    (and those retention rewrote) a full snapshot; and, each time the deltas since the last
    snapshot or compaction reach ARBITER_CHECKPOINT_COMPACT_BYTES, their composition (runs.state).
    Loading any checkpoint = nearest snapshot + the compactions after it + the deltas after the last
    of those; storage grows linearly with steps."""

    # No index of its own: the unique (run, sequence) constraint's index leads with it (ADR 0010).
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="checkpoints", db_index=False)
    sequence = models.PositiveIntegerField(help_text="The step this checkpoint follows (0 = initial state).")
    step = models.OneToOneField(Step, on_delete=models.CASCADE, null=True, blank=True, related_name="checkpoint")
    schema_version = models.PositiveIntegerField()
    delta = models.JSONField(default=dict, blank=True)
    snapshot = models.JSONField(null=True, blank=True)
    # The composition of the deltas after checkpoint `compacted_since` up to this one (ADR 0010).
    compacted = models.JSONField(null=True, blank=True)
    compacted_since = models.PositiveIntegerField(null=True, blank=True)
    # The items that composition appended to the state's append-only fields ({field: [items]}),
    # kept out of `compacted` so that loading a state reads counts, not items (runs.state_load).
    compacted_items = models.JSONField(null=True, blank=True)
    state_hash = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["run", "sequence"], name="checkpoint_sequence_unique_per_run"),
        ]
        # Partial: only the rare rows that hold a snapshot or a compaction are in them, so a
        # steady-state step (a delta) writes neither. Loading a state finds its base snapshot and
        # the compactions after it through them, without walking the run's steps (runs.state_load).
        indexes = [
            models.Index(fields=["run", "sequence"], name="checkpoint_snapshots",
                         condition=models.Q(snapshot__isnull=False)),
            models.Index(fields=["run", "sequence"], name="checkpoint_compactions",
                         condition=models.Q(compacted__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"R{self.run_id}@{self.sequence}{' (snapshot)' if self.snapshot is not None else ''}"


class ModelCall(models.Model):
    """Exactly what a model was given at a step and what it answered. "What did the agent see at
    step 3" is `ModelCall.objects.filter(run=run, sequence=3)`."""

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="model_calls")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, null=True, blank=True, related_name="model_calls")
    sequence = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(default=1)
    agent = models.CharField(max_length=60)
    agent_version = models.CharField(max_length=20, blank=True)
    provider = models.CharField(max_length=60)
    model = models.CharField(max_length=200, blank=True)
    output_schema = models.CharField(max_length=100)
    messages = models.JSONField()
    context = models.JSONField()
    # {"case_id", "case_version", "evidence": [{"id", "sha256"}], "memory_ids", "artifact_ids", "finding_ids"}
    source_refs = models.JSONField(default=dict)
    raw_output = models.TextField(blank=True)
    validated_output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    provider_attempts = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    # Retention (runs.retention): when the content above (messages, context, raw and
    # validated output, error) was removed, and the sha256 of exactly what was removed (canonical
    # JSON of runs.retention.model_call_content), so "what did the agent see" still has an answer.
    purged_at = models.DateTimeField(null=True, blank=True)
    purged_sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["run_id", "sequence", "id"]
        indexes = [
            models.Index(fields=["run", "sequence"]),
            # The retention job's scan: model calls not purged yet, oldest first.
            models.Index(fields=["created_at"], condition=models.Q(purged_at__isnull=True),
                         name="modelcall_unpurged_created"),
        ]

    def __str__(self) -> str:
        return f"R{self.run_id}#{self.sequence} {self.agent} → {self.output_schema}"

    @property
    def is_purged(self) -> bool:
        return self.purged_at is not None

    @property
    def purge_note(self) -> str:
        """What an inspector shows in place of a purged call's content ("" while it is stored)."""
        if self.purged_at is None:
            return ""
        return (f"Purged on {timezone.localtime(self.purged_at):%Y-%m-%d} by the retention policy "
                f"(sha256 {self.purged_sha256}).")


class EffectType(models.TextChoices):
    READ_ONLY = "read_only", "Read only"
    DRAFT = "draft", "Draft"
    INTERNAL_MUTATION = "internal_mutation", "Internal mutation"
    EXTERNAL_NOTIFICATION = "external_notification", "External notification"
    IRREVERSIBLE = "irreversible", "Irreversible"

    @classmethod
    def without_approval(cls) -> frozenset[str]:
        return frozenset({cls.READ_ONLY, cls.DRAFT})


class ToolCallStatus(models.TextChoices):
    STARTED = "started", "Started (outcome unknown until recorded)"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    REFUSED = "refused", "Refused by policy"


class ToolCall(models.Model):
    """A side effect a node asked for. The row is committed as `started` BEFORE the effect; the
    unique idempotency key (`<run>:<step>:<action>`) means a retried step finds it and reconciles
    instead of acting twice."""

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="tool_calls")
    step = models.ForeignKey(Step, on_delete=models.SET_NULL, null=True, blank=True, related_name="tool_calls")
    sequence = models.PositiveIntegerField()
    tool = models.CharField(max_length=60)
    action = models.CharField(max_length=100)
    effect_type = models.CharField(max_length=30, choices=EffectType.choices)
    idempotency_key = models.CharField(max_length=200, unique=True)
    arguments = models.JSONField(default=dict)
    actor_id = models.CharField(max_length=200)
    policy_decision = models.CharField(max_length=20)  # allowed | denied
    policy_reason = models.TextField(blank=True)
    approval = models.ForeignKey("cases.Approval", on_delete=models.PROTECT, null=True, blank=True,
                                 related_name="+")
    status = models.CharField(max_length=20, choices=ToolCallStatus.choices)
    result = models.JSONField(null=True, blank=True)
    external_ref = models.CharField(max_length=100, blank=True)  # "proposal:12", "notice:4"
    reconciled = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "sequence", "id"]

    def __str__(self) -> str:
        return f"{self.idempotency_key} {self.tool} {self.status}"


class ImmutableRow(models.Model):
    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValueError(f"{type(self).__name__} rows are immutable once written.")
        super().save(*args, **kwargs)


def content_hash(content) -> str:
    return sha256_hex(canonical_json(content))


class Artifact(ImmutableRow):
    """Durable agent output with provenance (summaries, risk assessments, drafts, disputes)."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey("cases.Case", on_delete=models.PROTECT, null=True, blank=True,
                             related_name="artifacts")
    run = models.ForeignKey(AgentRun, on_delete=models.PROTECT, related_name="artifacts")
    step = models.ForeignKey(Step, on_delete=models.PROTECT, null=True, blank=True, related_name="artifacts")
    kind = models.CharField(max_length=40)  # triage, evidence_summary, risk_assessment, policy_check, ...
    content = models.JSONField()
    content_hash = models.CharField(max_length=64)
    source_refs = models.JSONField(default=dict)
    schema_version = models.PositiveIntegerField(default=1)
    produced_by = models.CharField(max_length=200)  # actor identifier
    copied_from = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["case", "kind"])]

    def __str__(self) -> str:
        return f"A{self.pk} {self.kind}"


class Finding(ImmutableRow):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey("cases.Case", on_delete=models.PROTECT, null=True, blank=True,
                             related_name="findings")
    run = models.ForeignKey(AgentRun, on_delete=models.PROTECT, related_name="findings")
    step = models.ForeignKey(Step, on_delete=models.PROTECT, null=True, blank=True, related_name="findings")
    agent = models.CharField(max_length=60)
    type = models.CharField(max_length=40)
    summary = models.TextField()
    evidence_refs = models.JSONField(default=list)
    confidence = models.FloatField()
    contradicts = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="contradicted_by")
    data = models.JSONField(default=dict, blank=True)
    copied_from = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"F{self.pk} {self.agent}/{self.type}"


class MemoryStatus(models.TextChoices):
    PROPOSED = "proposed", "Proposed"
    ACTIVE = "active", "Active"
    REJECTED = "rejected", "Rejected"
    FORGOTTEN = "forgotten", "Forgotten"


class MemoryType(models.TextChoices):
    PREFERENCE = "preference", "Preference"
    PROCEDURE = "procedure", "Procedure"
    OBSERVATION = "observation", "Observation"


class MemoryRecord(models.Model):
    """Governed cross-run memory. Agents only propose; a person confirms. Only active,
    unexpired records ever enter a context. Never a domain fact (status, risk, notice sent)."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    # "tenant" (everyone), "user:<id>" (one analyst's preferences) or "case:<reference>"
    subject = models.CharField(max_length=200)
    type = models.CharField(max_length=20, choices=MemoryType.choices, default=MemoryType.PREFERENCE)
    content = models.TextField()
    source_refs = models.JSONField(default=dict, blank=True)
    confidence = models.FloatField(default=0.5)
    status = models.CharField(max_length=20, choices=MemoryStatus.choices, default=MemoryStatus.PROPOSED)
    expires_at = models.DateTimeField()
    proposed_by = models.CharField(max_length=200)
    run = models.ForeignKey(AgentRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="memories")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "status", "subject"])]

    def __str__(self) -> str:
        return f"M{self.pk} {self.subject}: {self.content[:50]}"
