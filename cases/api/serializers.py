"""Output serializers shared by several API views (input serializers live inside their views).

They only read: every write goes through cases.services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from cases.models import (
    Case,
    CaseEvent,
    CaseStatus,
    Evidence,
    EvidenceKind,
    Notice,
    NoticeStatus,
    Proposal,
    ProposalKind,
    ProposalStatus,
    RiskLevel,
)


class CaseOutputSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=CaseStatus.choices)
    risk_level = serializers.ChoiceField(choices=RiskLevel.choices)
    assignee = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Case
        fields = ["reference", "title", "product", "sub_product", "issue", "sub_issue", "company", "consumer_state",
                  "tags", "complainant_name", "complainant_email", "source", "source_reference", "received_at",
                  "status", "risk_level", "assigned_team", "assignee", "resolution", "version", "created_at",
                  "updated_at", "acknowledge_due", "response_due", "close_due", "deadline_policy_version",
                  "deadline_paused_on"]
        read_only_fields = fields


class CaseListOutputSerializer(CaseOutputSerializer):
    pending_proposals = serializers.IntegerField(read_only=True, help_text="Proposals waiting for a decision.")

    class Meta(CaseOutputSerializer.Meta):
        fields = [*CaseOutputSerializer.Meta.fields, "pending_proposals"]
        read_only_fields = fields


class EvidenceOutputSerializer(serializers.ModelSerializer):
    case = serializers.CharField(source="case.reference", read_only=True)
    kind = serializers.ChoiceField(choices=EvidenceKind.choices)
    text = serializers.SerializerMethodField(help_text="The text of text evidence; empty for files.")

    class Meta:
        model = Evidence
        fields = ["id", "case", "kind", "title", "text", "filename", "content_type", "size", "sha256", "source",
                  "added_by", "created_at"]
        read_only_fields = fields

    def get_text(self, evidence: Evidence) -> str:
        return evidence.text if evidence.kind == EvidenceKind.TEXT else ""


class ProposalOutputSerializer(serializers.ModelSerializer):
    case = serializers.CharField(source="case.reference", read_only=True)
    kind = serializers.ChoiceField(choices=ProposalKind.choices)
    status = serializers.ChoiceField(choices=ProposalStatus.choices)
    summary = serializers.CharField(read_only=True)
    is_stale = serializers.SerializerMethodField(
        help_text="True when one of the proposal's preconditions changed: it can no longer be approved.")
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Proposal
        fields = ["id", "case", "kind", "payload", "summary", "rationale", "evidence_refs", "proposer_type",
                  "proposer_id", "run_id", "case_version", "is_stale", "policy_version", "status", "decided_by",
                  "decided_at", "decision_note", "created_at", "preconditions", "stale_reason"]
        read_only_fields = fields

    def get_is_stale(self, proposal: Proposal) -> bool:
        return proposal.status == ProposalStatus.STALE or (
            proposal.status == ProposalStatus.PENDING and bool(proposal.changed_preconditions(proposal.case)))


class NoticeOutputSerializer(serializers.ModelSerializer):
    case = serializers.CharField(source="case.reference", read_only=True)
    status = serializers.ChoiceField(choices=NoticeStatus.choices)

    class Meta:
        model = Notice
        fields = ["id", "case", "kind", "recipient", "subject", "body", "content_hash", "status", "drafted_by",
                  "last_edited_by", "submitted_by", "run_id", "version", "sent_at", "external_message_id",
                  "created_at", "updated_at", "check_flags", "checked_hash"]
        read_only_fields = fields


class CaseEventOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = CaseEvent
        fields = ["sequence", "event_type", "payload", "case_version", "actor_type", "actor_id", "run_id",
                  "policy_version", "created_at"]
        read_only_fields = fields


class AuditEventOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    stream = serializers.CharField()
    sequence = serializers.IntegerField()
    actor_type = serializers.CharField()
    actor_id = serializers.CharField()
    action = serializers.CharField()
    target_type = serializers.CharField()
    target_id = serializers.CharField()
    run_id = serializers.CharField()
    policy_version = serializers.CharField()
    decision = serializers.CharField()
    evidence_refs = serializers.ListField(child=serializers.JSONField())
    payload = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    prev_hash = serializers.CharField()
    hash = serializers.CharField()

    @extend_schema_field({"type": "object", "additionalProperties": True})
    def get_payload(self, event) -> dict:
        return event.payload


class ErrorOutputSerializer(serializers.Serializer):
    """The body of every refusal: a stable code, a sentence for a person, and field messages."""

    code = serializers.CharField(help_text="invalid, forbidden, not_found, not_allowed, stale, conflict, ...")
    detail = serializers.CharField()
    fields = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False,
                                   help_text="Only for invalid input: field name -> messages.")
