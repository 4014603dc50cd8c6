"""`GET /api/v1/event-types/`: the event catalogue — each type, what it means, the audit actions
it comes from and an example event (integrations.catalogue, ADR 0028)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.api import refusals
from core.api_base import ApiView
from integrations.catalogue import CATALOGUE, catalogue_entries, example_event
from integrations.models import EventType


class EventExampleSerializer(serializers.Serializer):
    id = serializers.CharField()
    sequence = serializers.IntegerField()
    type = serializers.ChoiceField(choices=EventType.choices)
    occurred_at = serializers.DateTimeField()
    tenant = serializers.CharField()
    data = serializers.DictField()


class EventTypeOutputSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=EventType.choices)
    description = serializers.CharField()
    deprecated = serializers.BooleanField(help_text="A former umbrella type: subscribe to the types it names.")
    audit_actions = serializers.ListField(child=serializers.CharField(),
                                          help_text="The audit actions this event is written from.")
    also_for_subscribers_of = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices),
        help_text="Deprecated types whose subscriptions and feed filters also receive this type.")
    example = EventExampleSerializer(help_text="An example event, as the feed lists it and a webhook posts it.")


class EventTypeListOutputSerializer(serializers.Serializer):
    results = EventTypeOutputSerializer(many=True)


def _catalogue_table() -> str:
    rows = "\n".join(f"| `{spec.type}` | {spec.description} |" for spec in CATALOGUE)
    return f"| type | what happened |\n|---|---|\n{rows}"


class EventTypeListApi(ApiView):
    @extend_schema(
        responses={200: EventTypeListOutputSerializer, **refusals(400)},
        summary="The event catalogue: every event type, with an example",
        description="Every change an integrator mirrors is one event type, in the feed (GET /api/v1/events/) and "
                    "to webhooks, written in the transaction of the change. The `data` of every event has the "
                    "same keys; GET its `object_url` for the object's current state.\n\n" + _catalogue_table(),
        examples=[OpenApiExample("catalogue", response_only=True, status_codes=["200"],
                                 value={"results": [{"type": spec.type, "description": spec.description,
                                                     "deprecated": spec.deprecated,
                                                     "audit_actions": list(spec.actions),
                                                     "also_for_subscribers_of": [],
                                                     "example": example_event(spec)}
                                                    for spec in CATALOGUE[:2]]})])
    def get(self, request):
        return Response(EventTypeListOutputSerializer({"results": catalogue_entries()}).data)
