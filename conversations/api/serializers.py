"""Output serializers for threads and messages. They only read: every write goes through
conversations.services. A redacted message's content reads "[redacted]" (and its metadata is
withheld), as everywhere else the application shows it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.models import Message, MessageRole, Thread
from core.api import PersonSerializer, RunIdField
from runs.api.serializers import JsonObjectField


class ThreadOutputSerializer(serializers.ModelSerializer):
    case = serializers.CharField(source="case.reference", read_only=True, allow_null=True, default=None)
    created_by = PersonSerializer(read_only=True)
    message_count = serializers.IntegerField(source="last_sequence", read_only=True,
                                             help_text="The sequence of the newest message.")

    class Meta:
        model = Thread
        fields = ["id", "title", "case", "created_by", "created_at", "message_count", "token_budget"]
        read_only_fields = fields


class PendingReplySerializer(serializers.Serializer):
    message_id = serializers.IntegerField(source="message.pk")
    sequence = serializers.IntegerField(source="message.sequence")
    run_id = RunIdField()
    run_status = serializers.CharField(allow_null=True,
                                       help_text="queued/running/waiting: the reply is coming; failed or "
                                                 "cancelled: it will not come unless the run is resumed.")


class SummaryOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    from_sequence = serializers.IntegerField()
    to_sequence = serializers.IntegerField()
    content = serializers.CharField()
    token_count = serializers.IntegerField()
    run_id = RunIdField()
    created_at = serializers.DateTimeField()


class ThreadDetailOutputSerializer(ThreadOutputSerializer):
    pending_replies = serializers.SerializerMethodField()
    latest_summary = serializers.SerializerMethodField(
        help_text="The summary the assistant reads instead of the turns it covers (originals stay stored).")

    class Meta(ThreadOutputSerializer.Meta):
        fields = [*ThreadOutputSerializer.Meta.fields, "pending_replies", "latest_summary"]
        read_only_fields = fields

    @extend_schema_field(PendingReplySerializer(many=True))
    def get_pending_replies(self, thread: Thread) -> list:
        return PendingReplySerializer(self.context.get("pending", []), many=True).data

    @extend_schema_field(SummaryOutputSerializer(allow_null=True))
    def get_latest_summary(self, thread: Thread) -> dict | None:
        summary = self.context.get("summary")
        return SummaryOutputSerializer(summary).data if summary is not None else None


class CitedSerializer(serializers.Serializer):
    case_status = serializers.CharField(allow_null=True, required=False)
    case_version = serializers.IntegerField(allow_null=True, required=False)
    artifact_ids = serializers.ListField(child=serializers.IntegerField(), required=False)
    evidence_ids = serializers.ListField(child=serializers.IntegerField(), required=False)


class RedactionOutputSerializer(serializers.Serializer):
    reason = serializers.CharField()
    redacted_by = serializers.CharField()
    redacted_at = serializers.DateTimeField()


class MessageOutputSerializer(serializers.ModelSerializer):
    role = serializers.ChoiceField(choices=MessageRole.choices)
    content = serializers.CharField(source="display_content", read_only=True)
    is_redacted = serializers.BooleanField(read_only=True)
    redaction = serializers.SerializerMethodField()
    metadata = serializers.SerializerMethodField()
    cited = serializers.SerializerMethodField(help_text="For an answer: the case status and version of the "
                                                        "snapshot it answered from, and the artifacts/evidence cited.")
    proposal_ids = serializers.SerializerMethodField(help_text="Proposals the answer created (approval required).")
    notice_ids = serializers.SerializerMethodField(help_text="Notices the answer drafted and submitted for approval.")
    memory_ids = serializers.SerializerMethodField(help_text="Memories the answer proposed (confirmation required).")
    in_reply_to = serializers.IntegerField(source="in_reply_to_id", read_only=True, allow_null=True)
    run_id = RunIdField()
    reply_run_id = RunIdField()

    class Meta:
        model = Message
        fields = ["id", "thread", "sequence", "role", "author_type", "author_id", "content", "is_redacted",
                  "redaction", "metadata", "cited", "proposal_ids", "notice_ids", "memory_ids", "run_id",
                  "reply_run_id", "in_reply_to", "created_at"]
        read_only_fields = fields

    @extend_schema_field(RedactionOutputSerializer(allow_null=True))
    def get_redaction(self, message: Message) -> dict | None:
        return RedactionOutputSerializer(message.redaction).data if message.is_redacted else None

    @extend_schema_field(JsonObjectField())
    def get_metadata(self, message: Message) -> dict:
        return {} if message.is_redacted else (message.metadata or {})

    @extend_schema_field(CitedSerializer(allow_null=True))
    def get_cited(self, message: Message) -> dict | None:
        cited = (message.metadata or {}).get("cited")
        return CitedSerializer(cited).data if cited else None

    def _ids(self, message: Message, key: str) -> list[int]:
        return list((message.metadata or {}).get(key) or [])

    def get_proposal_ids(self, message: Message) -> list[int]:
        return self._ids(message, "proposal_ids")

    def get_notice_ids(self, message: Message) -> list[int]:
        return self._ids(message, "notice_ids")

    def get_memory_ids(self, message: Message) -> list[int]:
        return self._ids(message, "memory_ids")


class ReplyRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    queue_position = serializers.IntegerField(allow_null=True)


class MessagePostOutputSerializer(serializers.Serializer):
    message = MessageOutputSerializer()
    reply_run = ReplyRunSerializer(help_text="The chat run that writes the answer; poll GET /runs/<id>/ or the "
                                             "thread's messages.")
