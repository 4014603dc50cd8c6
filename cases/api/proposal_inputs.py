"""The body of `POST /cases/{reference}/proposals/`: one shape per `kind`, each with the payload
that kind takes. The schema states them as a `oneOf` with `kind` as its discriminator, and the
server reads the body with the serializer its `kind` names, so both say the same thing: a
status_transition's payload is a transition (and a reason), a risk_level's a risk level, an
assignment's a team or an assignee (ADR 0028, addendum)."""

from __future__ import annotations

from collections.abc import Mapping

from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from accounts.models import User
from cases.models import CASE_TRANSITIONS, RISK_ORDER, ProposalKind
from core.api import BIGINT_MAX, KnownFieldsOnly
from core.api_fields import StrictCharField, StrictIntegerField
from core.api_schema import NOT_BLANK_NO_NUL
from core.errors import NotAllowed


class StatusTransitionPayload(KnownFieldsOnly, serializers.Serializer):
    """A change of the case's status: the transition, and why."""

    transition = serializers.ChoiceField(choices=list(CASE_TRANSITIONS),
                                         help_text="The transition to make; the case's status must allow it (else 409).")
    reason = StrictCharField(required=False, allow_blank=True, max_length=5000)


class RiskLevelPayload(KnownFieldsOnly, serializers.Serializer):
    """A new risk level for the case."""

    risk_level = serializers.ChoiceField(choices=[str(level) for level in RISK_ORDER],
                                         help_text="Another level than the case has now (the same one is 409).")


class AssignmentPayload(KnownFieldsOnly, serializers.Serializer):
    """Who takes the case: a team (not blank), an assignee, or both; assignee_id null is nobody."""

    schema_rules = {"anyOf": [{"required": ["team"], "properties": {"team": {"pattern": NOT_BLANK_NO_NUL}}},
                              {"required": ["assignee_id"], "properties": {"assignee_id": {"type": "integer"}}}]}

    team = StrictCharField(max_length=100, required=False, allow_blank=True)
    assignee_id = StrictIntegerField(min_value=1, max_value=BIGINT_MAX, required=False, allow_null=True,
                                     help_text="The id of an active person of your organisation (else 409).")

    def validate(self, attrs):
        if not attrs.get("team") and attrs.get("assignee_id") is None:
            raise serializers.ValidationError({"team": ["An assignment needs a team or an assignee_id."]})
        return attrs


class ProposalInput(serializers.Serializer):
    rationale = StrictCharField(max_length=10000)
    evidence_refs = serializers.ListField(child=StrictIntegerField(min_value=1, max_value=BIGINT_MAX),
                                          required=False, default=list, max_length=200,
                                          help_text="Evidence of this case (other evidence is 409).")
    idempotency_key = StrictCharField(max_length=200, required=False, allow_null=True, default=None,
                                      help_text="A repeated request with the same key returns the first proposal "
                                                "instead of making another.")


class StatusTransitionProposalInput(ProposalInput):
    kind = serializers.ChoiceField(choices=[ProposalKind.STATUS_TRANSITION.value])
    payload = StatusTransitionPayload()


class RiskLevelProposalInput(ProposalInput):
    kind = serializers.ChoiceField(choices=[ProposalKind.RISK_LEVEL.value])
    payload = RiskLevelPayload()


class AssignmentProposalInput(ProposalInput):
    kind = serializers.ChoiceField(choices=[ProposalKind.ASSIGNMENT.value])
    payload = AssignmentPayload()


PROPOSAL_INPUTS = {ProposalKind.STATUS_TRANSITION.value: StatusTransitionProposalInput,
                   ProposalKind.RISK_LEVEL.value: RiskLevelProposalInput,
                   ProposalKind.ASSIGNMENT.value: AssignmentProposalInput}

PROPOSAL_CREATE_SCHEMA = PolymorphicProxySerializer(component_name="ProposalCreateInput",
                                                    serializers=PROPOSAL_INPUTS, resource_type_field_name="kind")


def proposal_input(data, *, tenant_id: int) -> dict:
    """The validated body (400 naming each bad field), read with its kind's serializer. An assignee
    who is not an active person of the organisation is 409 (who exists is the server's state)."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    input_class = PROPOSAL_INPUTS.get(kind) if isinstance(kind, str) else None
    if input_class is None:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        raise serializers.ValidationError({"kind": [f"One of: {', '.join(PROPOSAL_INPUTS)}."]})
    serializer = input_class(data=data)
    serializer.is_valid(raise_exception=True)
    values = dict(serializer.validated_data)
    assignee_id = values["payload"].get("assignee_id")
    if assignee_id is not None and not User.objects.filter(pk=assignee_id, tenant_id=tenant_id, is_active=True,
                                                           is_service_account=False).exists():
        raise NotAllowed("The proposal was not created: the assignee is not an active person of your organisation.",
                         fields={"payload": {"assignee_id": [f"No active person with id {assignee_id} in your "
                                                             f"organisation."]}})
    return values
