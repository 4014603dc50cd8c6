"""Output serializers for runs, their steps, model calls, tool calls, findings, artifacts, and
memory. They only read: every write goes through runs.services."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api import PersonSerializer
from runs import selectors
from runs.models import (
    AgentRun,
    Artifact,
    EffectType,
    Finding,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    ModelCall,
    RunPhase,
    RunStatus,
    Step,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)

JSON_OBJECT = {"type": "object", "additionalProperties": True}


class JsonObjectField(serializers.JSONField):
    """A JSON object in the schema (rather than "any")."""


extend_schema_field(JSON_OBJECT)(JsonObjectField)


class RunBudgetSerializer(serializers.Serializer):
    max_steps = serializers.IntegerField()
    max_tokens = serializers.IntegerField()
    max_wall_seconds = serializers.IntegerField()


class RunUsageSerializer(serializers.Serializer):
    steps_used = serializers.IntegerField()
    tokens_used = serializers.IntegerField()


class RunOutputSerializer(serializers.ModelSerializer):
    case = serializers.CharField(source="case.reference", read_only=True, allow_null=True, default=None)
    thread = serializers.IntegerField(source="thread_id", read_only=True, allow_null=True)
    status = serializers.ChoiceField(choices=RunStatus.choices)
    phase = serializers.ChoiceField(choices=RunPhase.choices)
    budget = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()
    input = JsonObjectField()
    prompt_versions = JsonObjectField()
    parent_run = serializers.IntegerField(source="parent_run_id", read_only=True, allow_null=True)
    forked_from_sequence = serializers.SerializerMethodField(
        help_text="For a fork: the parent's step after whose checkpoint it started (0 = the start).")
    completed_nodes = serializers.SerializerMethodField(
        help_text="The node of each completed step, in order (a fork's copied steps included).")

    class Meta:
        model = AgentRun
        fields = ["id", "case", "thread", "graph", "graph_version", "input", "status", "phase", "current_node",
                  "completed_nodes", "next_sequence", "budget", "usage", "error", "error_code",
                  "cancel_requested_at", "wait_reason", "started_by", "provider_name", "model_name",
                  "prompt_versions", "lease_owner", "lease_expires_at", "heartbeat_at", "parent_run",
                  "forked_from_sequence", "queued_at", "started_at", "finished_at"]
        read_only_fields = fields

    @extend_schema_field(RunBudgetSerializer)
    def get_budget(self, run: AgentRun) -> dict:
        return {"max_steps": run.max_steps, "max_tokens": run.max_tokens, "max_wall_seconds": run.max_wall_seconds}

    @extend_schema_field(RunUsageSerializer)
    def get_usage(self, run: AgentRun) -> dict:
        return {"steps_used": run.steps_used, "tokens_used": run.tokens_used}

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_completed_nodes(self, run: AgentRun) -> list[str]:
        return selectors.run_completed_nodes(run=run)

    def get_forked_from_sequence(self, run: AgentRun) -> int | None:
        if run.parent_run_id is None:
            return None
        return run.forked_from_checkpoint.sequence if run.forked_from_checkpoint_id else 0


class RunDetailOutputSerializer(RunOutputSerializer):
    queue_position = serializers.SerializerMethodField(
        help_text="While queued: its place in the tenant's FIFO queue (1 = next). Null once it left the queue.")
    running_runs = serializers.SerializerMethodField(
        help_text="While queued: how many of the tenant's runs are running now.")
    max_concurrent_runs = serializers.SerializerMethodField(
        help_text="The tenant's cap on running runs; a queued run waits while it is reached.")

    class Meta(RunOutputSerializer.Meta):
        fields = [*RunOutputSerializer.Meta.fields, "queue_position", "running_runs", "max_concurrent_runs"]
        read_only_fields = fields

    def get_queue_position(self, run: AgentRun) -> int | None:
        return self.context.get("queue", {}).get("position")

    def get_running_runs(self, run: AgentRun) -> int | None:
        return self.context.get("queue", {}).get("running")

    def get_max_concurrent_runs(self, run: AgentRun) -> int:
        return self.context.get("queue", {}).get("cap", 0)


class StepOutputSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=StepStatus.choices)
    copied_from = serializers.IntegerField(source="copied_from_id", read_only=True, allow_null=True)

    class Meta:
        model = Step
        fields = ["id", "sequence", "node", "attempt", "status", "outcome", "next_node", "summary", "error",
                  "worker_id", "tokens", "started_at", "finished_at", "duration_ms", "copied_from"]
        read_only_fields = fields


class ModelCallOutputSerializer(serializers.ModelSerializer):
    messages = serializers.ListField(child=JsonObjectField(),
                                     help_text="Exactly the messages the model was given (untrusted data "
                                               "in <untrusted_...> blocks).")
    context = JsonObjectField(help_text="The assembled context the messages were rendered from.")
    source_refs = JsonObjectField(help_text="case_id, case_version, evidence [{id, sha256}], memory_ids, "
                                            "artifact_ids, finding_ids (and thread refs for chat).")
    validated_output = JsonObjectField(allow_null=True)

    class Meta:
        model = ModelCall
        fields = ["id", "sequence", "attempt", "agent", "agent_version", "provider", "model", "output_schema",
                  "messages", "context", "source_refs", "raw_output", "validated_output", "error", "prompt_tokens",
                  "completion_tokens", "latency_ms", "provider_attempts", "created_at", "purged_at",
                  "purged_sha256"]
        read_only_fields = fields


class ToolCallOutputSerializer(serializers.ModelSerializer):
    effect_type = serializers.ChoiceField(choices=EffectType.choices)
    status = serializers.ChoiceField(choices=ToolCallStatus.choices)
    arguments = JsonObjectField()
    result = JsonObjectField(allow_null=True)
    approval = serializers.IntegerField(source="approval_id", read_only=True, allow_null=True)

    class Meta:
        model = ToolCall
        fields = ["id", "sequence", "tool", "action", "effect_type", "idempotency_key", "arguments", "actor_id",
                  "policy_decision", "policy_reason", "approval", "status", "result", "external_ref", "reconciled",
                  "error", "error_code", "started_at", "finished_at", "duration_ms"]
        read_only_fields = fields


class FindingOutputSerializer(serializers.ModelSerializer):
    step_sequence = serializers.IntegerField(read_only=True, allow_null=True,
                                             help_text="The step that produced it (set by the view).")
    evidence_refs = serializers.ListField(child=serializers.IntegerField())
    contradicts = serializers.IntegerField(source="contradicts_id", read_only=True, allow_null=True)
    copied_from = serializers.IntegerField(source="copied_from_id", read_only=True, allow_null=True)
    data = JsonObjectField()

    class Meta:
        model = Finding
        fields = ["id", "step_sequence", "agent", "type", "summary", "evidence_refs", "confidence", "contradicts",
                  "data", "copied_from", "created_at"]
        read_only_fields = fields


class ArtifactOutputSerializer(serializers.ModelSerializer):
    step_sequence = serializers.IntegerField(read_only=True, allow_null=True,
                                             help_text="The step that produced it (set by the view).")
    content = JsonObjectField()
    source_refs = JsonObjectField(help_text="What it rests on: case_version, evidence [{id, sha256}], memory_ids, "
                                            "artifact_ids, finding_ids.")
    copied_from = serializers.IntegerField(source="copied_from_id", read_only=True, allow_null=True)

    class Meta:
        model = Artifact
        fields = ["id", "run", "step_sequence", "kind", "content", "content_hash", "source_refs",
                  "schema_version", "produced_by", "copied_from", "created_at"]
        read_only_fields = fields


class MemoryOutputSerializer(serializers.ModelSerializer):
    type = serializers.ChoiceField(choices=MemoryType.choices)
    status = serializers.ChoiceField(choices=MemoryStatus.choices)
    source_refs = JsonObjectField()
    is_expired = serializers.SerializerMethodField(help_text="Past its expiry: it enters no context.")
    decided_by = PersonSerializer(read_only=True, allow_null=True)

    class Meta:
        model = MemoryRecord
        fields = ["id", "subject", "type", "content", "source_refs", "confidence", "status", "is_expired",
                  "expires_at", "proposed_by", "run", "decided_by", "decided_at", "decision_note", "created_at"]
        read_only_fields = fields

    def get_is_expired(self, memory: MemoryRecord) -> bool:
        return memory.expires_at <= timezone.now()
