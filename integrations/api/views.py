"""REST API of integrations: who am I, the event feed, webhook endpoints and their deliveries."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db.models import QuerySet
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from core.api import BIGINT_MAX, ERROR_TEXT, ErrorOutputSerializer, PersonSerializer, refusals
from core.api_base import ApiView, ListApi, check_if_match, with_etag
from core.api_fields import StrictCharField, StrictURLField
from core.errors import Forbidden, NotFound
from integrations.catalogue import CATALOGUE, example_event, types_matching
from integrations.events import event_representation, feed_assign
from integrations.models import DeliveryError, EventType, IntegrationEvent, WebhookDelivery, WebhookEndpoint
from integrations.webhooks import (
    FORBIDDEN,
    MANAGERS,
    NO_ENDPOINT,
    SUBSCRIBABLE_TYPES,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_update,
    webhook_ping,
    webhook_redeliver,
    webhook_redeliver_since,
    webhook_secret_rotate,
)

# --- me ------------------------------------------------------------------------------------------


class MeOutputSerializer(serializers.Serializer):
    person = PersonSerializer(help_text="You (for an API key: its service account).")
    tenant = serializers.CharField(help_text="Your organisation's slug.")
    role = serializers.CharField()
    credential = serializers.ChoiceField(choices=["api_key", "session", "basic"])
    api_key_name = serializers.CharField(allow_null=True, help_text="The key's name when you use one.")
    api_key_expires_at = serializers.DateTimeField(allow_null=True)


class MeApi(ApiView):
    @extend_schema(responses={200: MeOutputSerializer, **refusals(400)}, summary="Who you are to the API",
                   description="Your person, organisation and role, and the API key you authenticated with.")
    def get(self, request):
        api_key = request.auth if type(request.auth).__name__ == "ApiKey" else None
        credential = "api_key" if api_key else ("basic" if request.headers.get("Authorization", "")
                                                .lower().startswith("basic ") else "session")
        body = {"person": request.user, "tenant": request.user.tenant.slug if request.user.tenant else "",
                "role": request.user.role, "credential": credential,
                "api_key_name": api_key.name if api_key else None,
                "api_key_expires_at": api_key.expires_at if api_key else None}
        return Response(MeOutputSerializer(body).data)


# --- the event feed -----------------------------------------------------------------------------

class EventOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Stable event id (also the webhook's Arbiter-Event-Id): deduplicate on it.")
    sequence = serializers.IntegerField(help_text="The feed cursor: pass the last one you read as `after`.")
    type = serializers.ChoiceField(choices=EventType.choices, help_text="What changed: one of the event types "
                                   "(GET /api/v1/event-types/ for each type's description and example).")
    occurred_at = serializers.DateTimeField()
    tenant = serializers.CharField()
    data = serializers.DictField(help_text="action, actor, decision, target_type, target_id, case (reference), "
                                           "run_id, object_url (GET it for the current state), audit_event_id.")


class EventFeedOutputSerializer(serializers.Serializer):
    results = EventOutputSerializer(many=True)
    next_after = serializers.IntegerField(help_text="Pass as `after` to read what comes next (the same value "
                                                    "when there is nothing new yet).")


class EventFeedApi(ApiView):
    query_params_allowed = ("after", "limit", "type")

    @extend_schema(
        parameters=[
            OpenApiParameter("after", {"type": "integer", "minimum": 0, "maximum": BIGINT_MAX, "default": 0},
                             description="The `sequence` of the last event you read (0: from the start).",
                             required=False),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 100},
                             description="At most this many events (1..500, default 100).", required=False),
            OpenApiParameter("type", str, enum=EventType.values, description="Only events of this type (a "
                             "deprecated umbrella type returns every type it stands for).", required=False),
        ],
        responses={200: EventFeedOutputSerializer, **refusals(400)},
        examples=[OpenApiExample(spec.type, summary=spec.description, response_only=True, status_codes=["200"],
                                 value={"results": [example_event(spec)], "next_after": 1042})
                  for spec in CATALOGUE if not spec.deprecated],
        summary="The tenant's events, in commit order, for integrations that poll",
        description="The same events as the webhooks. An event committed later always gets a later sequence, "
                    "so reading from `after=<last sequence>` never skips one.")
    def get(self, request):
        after = _whole(request.query_params.get("after", "0"), "after", 0, BIGINT_MAX)
        limit = _whole(request.query_params.get("limit", "100"), "limit", 1, 500)
        kind = request.query_params.get("type")
        if kind is not None and kind not in EventType.values:
            raise ValidationError({"type": [f"One of: {', '.join(EventType.values)}."]})
        feed_assign()
        events = IntegrationEvent.objects.filter(tenant_id=request.user.tenant_id, feed_sequence__gt=after)
        if kind:
            events = events.filter(type__in=types_matching(kind))
        page = list(events.order_by("feed_sequence")[:limit])
        slug = request.user.tenant.slug if request.user.tenant else ""
        body = {"results": [event_representation(event, tenant_slug=slug) for event in page],
                "next_after": page[-1].feed_sequence if page else after}
        return Response(EventFeedOutputSerializer(body).data)


def _whole(raw: str, name: str, low: int, high: int) -> int:
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ValidationError({name: [f"A whole number from {low} to {high}."]})
    return int(raw)


# --- webhooks -------------------------------------------------------------------------------------

SUBSCRIBABLE_CHOICES = [(value, label) for value, label in EventType.choices if value in SUBSCRIBABLE_TYPES]


class WebhookEndpointOutputSerializer(serializers.ModelSerializer):
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE_CHOICES))
    created_by = PersonSerializer(read_only=True, allow_null=True)
    failing_since = serializers.DateTimeField(
        allow_null=True, read_only=True,
        help_text="When its deliveries began failing with no success since (null while they succeed). It is "
                  "disabled when one fails after this streak has lasted ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS "
                  "(24 hours by default).")
    previous_secret_expires_at = serializers.DateTimeField(
        allow_null=True, read_only=True,
        help_text="After a rotation: until when deliveries also carry a signature made with the previous secret.")

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "description", "event_types", "is_active", "disabled_at", "disabled_reason",
                  "consecutive_failures", "failing_since", "previous_secret_expires_at", "created_by",
                  "created_at", "updated_at"]
        read_only_fields = fields


class WebhookEndpointCreatedSerializer(WebhookEndpointOutputSerializer):
    secret = serializers.CharField(help_text="The signing secret, shown only in this response: store it.")

    class Meta(WebhookEndpointOutputSerializer.Meta):
        fields = [*WebhookEndpointOutputSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookAttemptSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()
    status_code = serializers.IntegerField(allow_null=True, help_text="The receiver's HTTP status, if it answered.")
    error_category = serializers.ChoiceField(
        choices=DeliveryError.choices, allow_blank=True,
        help_text="Why the attempt failed, in a word (the receiver's body and raw error texts are never shown).")
    succeeded = serializers.BooleanField()


class WebhookDeliveryOutputSerializer(serializers.ModelSerializer):
    event = serializers.SerializerMethodField()
    last_error_category = serializers.ChoiceField(choices=DeliveryError.choices, allow_blank=True,
                                                  help_text="The last attempt's error category.")
    event_type = serializers.CharField(source="event.type")
    attempt_log = WebhookAttemptSerializer(many=True, read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = ["id", "endpoint", "event", "event_type", "status", "attempts", "next_attempt_at",
                  "last_status_code", "last_error_category", "delivered_at", "created_at", "attempt_log"]
        read_only_fields = fields

    def get_event(self, delivery) -> str:
        return f"evt_{delivery.event_id}"


def _managed(request) -> None:
    if request.user.role not in MANAGERS:
        raise Forbidden(FORBIDDEN)


def _endpoint(request, pk: int) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.filter(tenant_id=request.user.tenant_id, pk=pk, deleted_at__isnull=True).first()
    if endpoint is None:
        raise NotFound(NO_ENDPOINT)
    return endpoint


def url_refusals(*codes: int) -> dict:
    """The refusals of an operation that takes a webhook URL: its 422 is also `url_unreachable`."""
    responses = refusals(*codes, 422)
    reused = ERROR_TEXT[422]
    responses[422] = OpenApiResponse(ErrorOutputSerializer, description=URL_UNREACHABLE_TEXT, examples=[
        OpenApiExample("url_unreachable", value=URL_UNREACHABLE_EXAMPLE, response_only=True, status_codes=["422"]),
        OpenApiExample(reused[1], value=reused[2], response_only=True, status_codes=["422"])])
    return responses


URL_UNREACHABLE_TEXT = (
    "`url_unreachable`: the URL is well formed but its host does not resolve, or resolves to an address this "
    "deployment does not send to (loopback, private, link-local and other non-public addresses, unless the "
    "operator allows their network: ARBITER_WEBHOOK_ALLOWED_NETWORKS). DNS and the settings decide this, not "
    "the URL's text; nothing was changed. Or `idempotency_key_reused`: this Idempotency-Key was used with a "
    "different request.")
URL_UNREACHABLE_EXAMPLE = {"code": "url_unreachable", "detail": "The webhook URL must reach a public internet address.",
                           "fields": {"url": ["This host is, or resolves to, a loopback, private, link-local or "
                                              "otherwise non-public address."]}}


class WebhookEndpointListCreateApi(ListApi):
    queryset = WebhookEndpoint.objects.none()
    output_serializer_class = WebhookEndpointOutputSerializer
    ordering_fields = ("-created_at", "created_at")

    class WebhookEndpointInput(serializers.Serializer):
        url = StrictURLField(max_length=500, help_text="https:// (http:// only where the operator allows it), "
                                                             "no user:password@, a host that resolves to public "
                                                             "internet addresses only.")
        event_types = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE_CHOICES), min_length=1,
                                            max_length=len(SUBSCRIBABLE_CHOICES))
        description = StrictCharField(max_length=200, required=False, allow_blank=True)

    serializer_class = WebhookEndpointInput

    def select(self, request, **params) -> QuerySet:
        _managed(request)
        return WebhookEndpoint.objects.filter(tenant_id=request.user.tenant_id, deleted_at__isnull=True) \
            .select_related("created_by")

    @extend_schema(responses={200: WebhookEndpointOutputSerializer(many=True), **refusals(400, 403)},
                   summary="The tenant's webhook endpoints (supervisors and admins)")
    def get(self, request):
        return self.list_response(request)

    @extend_schema(request=WebhookEndpointInput,
                   responses={201: WebhookEndpointCreatedSerializer, **url_refusals(400, 403, 409, 413, 415)},
                   summary="Register a webhook endpoint (supervisors and admins)",
                   description="The answer holds the signing secret, once. Each delivery is signed: "
                               "`Arbiter-Signature: t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">`.")
    def post(self, request):
        _managed(request)
        data = self.WebhookEndpointInput(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint, secret = webhook_endpoint_create(actor=request.user, **data.validated_data)
        body = {**WebhookEndpointOutputSerializer(endpoint).data, "secret": secret}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": f"/api/v1/webhooks/{endpoint.pk}/"})


class WebhookEndpointDetailApi(ApiView):
    honours_if_match = True
    class WebhookEndpointEditInput(serializers.Serializer):
        url = StrictURLField(max_length=500, required=False)
        event_types = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE_CHOICES), min_length=1,
                                            max_length=len(SUBSCRIBABLE_CHOICES), required=False)
        description = StrictCharField(max_length=200, required=False, allow_blank=True)
        is_active = serializers.BooleanField(required=False, help_text="false disables it (its events are "
                                                                       "queued meanwhile); true enables it again, "
                                                                       "ends its failure streak and sends the "
                                                                       "queued events, oldest first.")

    @extend_schema(responses={200: WebhookEndpointOutputSerializer, **refusals(400, 403, 404)},
                   summary="A webhook endpoint")
    def get(self, request, pk: int):
        _managed(request)
        endpoint = _endpoint(request, pk)
        return with_etag(Response(WebhookEndpointOutputSerializer(endpoint).data), endpoint)

    @extend_schema(request=WebhookEndpointEditInput,
                   responses={200: WebhookEndpointOutputSerializer, **url_refusals(400, 403, 404, 409, 413, 415)},
                   summary="Change, disable or enable a webhook endpoint")
    def patch(self, request, pk: int):
        _managed(request)
        endpoint = _endpoint(request, pk)
        data = self.WebhookEndpointEditInput(data=request.data)
        data.is_valid(raise_exception=True)
        check_if_match(request, endpoint)
        endpoint = webhook_endpoint_update(actor=request.user, endpoint=endpoint, **data.validated_data)
        return with_etag(Response(WebhookEndpointOutputSerializer(endpoint).data), endpoint)

    @extend_schema(request=None, responses={204: OpenApiResponse(description="Deleted."),
                                            **refusals(400, 403, 404, 409, 412, 422)},
                   summary="Delete a webhook endpoint",
                   description="It is never delivered to again and its queued deliveries are cancelled. Its "
                               "delivery log is kept for the record (operators see it in the admin); the API "
                               "answers 404 for the endpoint from now on.")
    def delete(self, request, pk: int):
        _managed(request)
        endpoint = _endpoint(request, pk)
        check_if_match(request, endpoint)
        webhook_endpoint_delete(actor=request.user, endpoint=endpoint)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookDeliveryListApi(ListApi):
    queryset = WebhookDelivery.objects.none()
    output_serializer_class = WebhookDeliveryOutputSerializer
    ordering_fields = ("-id", "id")

    def select(self, request, *, pk: int) -> QuerySet:
        _managed(request)
        return _endpoint(request, pk).deliveries.select_related("event").prefetch_related("attempt_log")

    @extend_schema(responses={200: WebhookDeliveryOutputSerializer(many=True), **refusals(400, 403, 404)},
                   summary="An endpoint's deliveries, each with its log of attempts")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class WebhookRedeliverApi(ApiView):
    @extend_schema(request=None,
                   responses={202: OpenApiResponse(WebhookDeliveryOutputSerializer, description="Queued again."),
                              **refusals(400, 403, 404, 409, 422)},
                   summary="Deliver an event again (after the receiver was fixed)")
    def post(self, request, pk: int):
        _managed(request)
        delivery = WebhookDelivery.objects.filter(endpoint__tenant_id=request.user.tenant_id, pk=pk,
                                                  endpoint__deleted_at__isnull=True).first()
        if delivery is None:
            raise NotFound("No such delivery.")
        delivery = webhook_redeliver(actor=request.user, delivery=delivery)
        return Response(WebhookDeliveryOutputSerializer(delivery).data, status=status.HTTP_202_ACCEPTED,
                        headers={"Location": f"/api/v1/webhooks/{delivery.endpoint_id}/deliveries/"})


# An event id or a feed sequence (integrations.webhooks.EVENT_ID, SEQUENCE); `\n?` because a
# pattern's `$` admits one final line break in Python and none in ECMA 262: stated, both agree.
SINCE_EVENT_PATTERN = "^(evt_[0-9]{1,18}|[0-9]{1,18})\\n?$"


@extend_schema_field({"oneOf": [{"type": "string", "maxLength": 40, "pattern": SINCE_EVENT_PATTERN},
                                {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}]})
class SinceEventField(serializers.CharField):
    """An event id (`evt_123`) or a feed sequence, the sequence as text or as a whole number."""

    default_error_messages = {"not_event": "An event id such as evt_123, or a feed sequence (a whole number)."}

    def __init__(self, **kwargs):
        super().__init__(max_length=40, trim_whitespace=False, **kwargs)
        # ECMA 262's `$` is Python's `\Z`: "1\n\n" matches neither.
        self.validators.append(RegexValidator(SINCE_EVENT_PATTERN[:-1] + "\\Z", message=self.error_messages["not_event"]))

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("not_event")
        return super().to_internal_value(str(data))


class WebhookRedeliverSinceApi(ApiView):
    class RedeliverSinceInput(serializers.Serializer):
        schema_rules = {"oneOf": [{"required": ["since"]}, {"required": ["since_event"]}]}  # exactly one

        since = serializers.DateTimeField(required=False, help_text="Every event that occurred at or after this "
                                                                    "time (ISO 8601, e.g. 2026-11-27T06:00:00Z).")
        since_event = SinceEventField(
            required=False,
            help_text="Every event from this one on, in feed order: an event `id` (evt_123, this event included) "
                      "or a feed `sequence` (a whole number: sequences from it on).")

    class RedeliverSinceOutput(serializers.Serializer):
        events = serializers.IntegerField(help_text="Events since that point of the types the endpoint subscribes to.")
        queued = serializers.IntegerField(help_text="Deliveries queued by this call (new, or sent again).")
        already_queued = serializers.IntegerField(help_text="Events already waiting to be delivered: left as they are.")

    @extend_schema(
        request=RedeliverSinceInput,
        responses={202: OpenApiResponse(RedeliverSinceOutput, description="Queued; sent oldest first (a disabled "
                                                                          "endpoint's wait until it is enabled)."),
                   **refusals(400, 403, 404, 409, 413, 415, 422)},
        summary="Redeliver every event since a time or an event",
        description="Give exactly one of `since` and `since_event`. At most ARBITER_WEBHOOK_REDELIVER_MAX events "
                    "(1000 by default) per call: beyond that the answer is 400 and nothing is queued; start from a "
                    "later point. Send an `Idempotency-Key` to retry the call safely.")
    def post(self, request, pk: int):
        _managed(request)
        endpoint = _endpoint(request, pk)
        data = self.RedeliverSinceInput(data=request.data)
        data.is_valid(raise_exception=True)
        counts = webhook_redeliver_since(actor=request.user, endpoint=endpoint, **data.validated_data)
        return Response(self.RedeliverSinceOutput(counts).data, status=status.HTTP_202_ACCEPTED,
                        headers={"Location": f"/api/v1/webhooks/{endpoint.pk}/deliveries/"})


class WebhookSecretRotatedSerializer(WebhookEndpointOutputSerializer):
    secret = serializers.CharField(help_text="The new signing secret, shown only in this response: store it.")

    class Meta(WebhookEndpointOutputSerializer.Meta):
        fields = [*WebhookEndpointOutputSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookSecretRotateApi(ApiView):
    @extend_schema(
        request=None, responses={200: WebhookSecretRotatedSerializer, **refusals(400, 403, 404, 409, 422)},
        summary="Rotate an endpoint's signing secret",
        description="The answer holds the new secret, once. Until `previous_secret_expires_at` "
                    "(ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS, 24 hours by default) each delivery carries two "
                    "signatures, `Arbiter-Signature: t=<unix>,v1=<new>,v1=<old>`: accept the request when any `v1` "
                    "matches a secret you hold. Afterwards only the new one is sent.")
    def post(self, request, pk: int):
        _managed(request)
        endpoint, secret = webhook_secret_rotate(actor=request.user, endpoint=_endpoint(request, pk))
        return Response({**WebhookEndpointOutputSerializer(endpoint).data, "secret": secret})


class WebhookPingApi(ApiView):
    @extend_schema(
        request=None,
        responses={202: OpenApiResponse(WebhookDeliveryOutputSerializer, description="The ping is queued."),
                   **refusals(400, 403, 404, 409, 422)},
        summary="Send a test event (`ping`) to this endpoint",
        description="Only this endpoint gets it, whatever it subscribes to, and it is not in the event feed "
                    "(its `sequence` is null). Follow it in the endpoint's deliveries. A disabled endpoint is "
                    "refused (409): enable it first.")
    def post(self, request, pk: int):
        _managed(request)
        delivery = webhook_ping(actor=request.user, endpoint=_endpoint(request, pk))
        return Response(WebhookDeliveryOutputSerializer(delivery).data, status=status.HTTP_202_ACCEPTED,
                        headers={"Location": f"/api/v1/webhooks/{delivery.endpoint_id}/deliveries/"})
