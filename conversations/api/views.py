"""REST API for threads and messages (like cases.api): thin views with nested input serializers;
reads through conversations.selectors (tenant-scoped: another tenant's thread is 404), writes
through conversations.services, errors as {code, detail, fields?}.

Posting a message answers 202 Accepted with the pending run that writes the reply; the reply
appears in GET /threads/<id>/messages/ when that run has finished."""

from __future__ import annotations

import django_filters
from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from cases import selectors as case_selectors
from conversations import selectors, services
from conversations.api.serializers import (
    MessageOutputSerializer,
    MessagePostOutputSerializer,
    ThreadDetailOutputSerializer,
    ThreadOutputSerializer,
)
from conversations.models import Message, Thread
from core.api import INT_MAX, IntegerFilter, TextFilter, refusals
from core.api_base import ApiView, ListApi, MessagePostThrottle
from core.api_fields import StrictCharField
from core.errors import NotFound
from runs import selectors as run_selectors
from runs.api.serializers import RunDetailOutputSerializer
from runs.api.views import RUN_ACCEPTED, run_detail_response


def _thread(request, pk: int) -> Thread:
    return selectors.thread_get_for_user(user=request.user, pk=pk)


def thread_detail_response(request, thread: Thread, *, status_code: int = status.HTTP_200_OK) -> Response:
    fresh = _thread(request, thread.pk)
    context = {"pending": selectors.thread_pending_replies(thread=fresh),
               "summary": selectors.thread_latest_summary(thread=fresh)}
    return Response(ThreadDetailOutputSerializer(fresh, context=context).data, status=status_code)


class ThreadFilter(django_filters.FilterSet):
    case = TextFilter(max_length=40, help_text="Only threads about this case (its reference).")

    class Meta:
        model = Thread
        fields = ["case"]


class MessageFilter(django_filters.FilterSet):
    after = IntegerFilter(min_value=0, help_text="Only messages after this sequence (for polling).")

    class Meta:
        model = Message
        fields = ["after"]


class ThreadListCreateApi(ListApi):
    queryset = Thread.objects.none()
    filterset_class = ThreadFilter
    output_serializer_class = ThreadOutputSerializer
    ordering_fields = ("-created_at", "created_at")

    class ThreadCreateInput(serializers.Serializer):
        title = StrictCharField(max_length=300)
        case = StrictCharField(max_length=40, required=False, allow_null=True, default=None,
                                     help_text="The case the thread is about (its reference); optional.")
        token_budget = serializers.IntegerField(
            required=False, allow_null=True, default=None, min_value=200, max_value=INT_MAX,
            help_text=f"Context budget for the thread part (default: a setting); at most "
                      f"ARBITER_API_MAX_THREAD_TOKEN_BUDGET (here {settings.ARBITER_API_MAX_THREAD_TOKEN_BUDGET}).")

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # The schema states the ceiling in force (validate_token_budget enforces it).
            self.fields["token_budget"].max_value = min(settings.ARBITER_API_MAX_THREAD_TOKEN_BUDGET, INT_MAX)

        def validate_token_budget(self, value):
            ceiling = settings.ARBITER_API_MAX_THREAD_TOKEN_BUDGET
            if value is not None and value > ceiling:
                raise serializers.ValidationError(f"Ensure this value is less than or equal to {ceiling} "
                                                  f"(the server's ceiling).")
            return value

    serializer_class = ThreadCreateInput

    def select(self, request, **params):
        queryset = selectors.thread_list_for_user(user=request.user)
        if params.get("case"):
            queryset = queryset.filter(case__reference=params["case"])  # still within the user's tenant
        return queryset

    @extend_schema(responses={200: ThreadOutputSerializer(many=True), **refusals(400)},
                   summary="List the tenant's threads")
    def get(self, request):
        return self.list_response(request)

    @extend_schema(request=ThreadCreateInput,
                   responses={201: ThreadDetailOutputSerializer, **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Open a thread with the case assistant")
    def post(self, request):
        data = self.ThreadCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        case = None
        if values["case"]:
            try:
                case = case_selectors.case_get_for_user(user=request.user, reference=values["case"])
            except NotFound:
                raise NotFound("No such case.", fields={"case": [f"There is no case {values['case']} in your "
                                                                f"organisation."]}) from None
        thread = services.thread_create(actor=request.user, tenant=request.user.tenant, case=case,
                                        title=values["title"], token_budget=values["token_budget"])
        response = thread_detail_response(request, thread, status_code=status.HTTP_201_CREATED)
        response["Location"] = f"/api/v1/threads/{thread.pk}/"
        return response


class ThreadDetailApi(ApiView):
    @extend_schema(responses={200: ThreadDetailOutputSerializer, **refusals(400, 404)},
                   summary="A thread, with its pending replies and latest summary")
    def get(self, request, pk: int):
        return thread_detail_response(request, _thread(request, pk))


class ThreadMessageListPostApi(ListApi):
    queryset = Message.objects.none()
    filterset_class = MessageFilter
    output_serializer_class = MessageOutputSerializer
    ordering_fields = ("sequence",)
    throttle_classes = [MessagePostThrottle]

    class MessagePostInput(serializers.Serializer):
        content = StrictCharField(trim_whitespace=False,
                                        help_text="The message; its length limit is the server's setting.")

    serializer_class = MessagePostInput

    def select(self, request, *, pk: int, **params):
        return selectors.message_list_for_user(user=request.user, thread=_thread(request, pk),
                                               after_sequence=int(params.get("after") or 0))

    @extend_schema(responses={200: MessageOutputSerializer(many=True), **refusals(400, 404)},
                   summary="A thread's messages in order (redacted ones read \"[redacted]\")")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)

    @extend_schema(request=MessagePostInput,
                   responses={202: OpenApiResponse(MessagePostOutputSerializer, description=RUN_ACCEPTED),
                              **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Post a message; the assistant's reply is written by the returned run")
    def post(self, request, pk: int):
        thread = _thread(request, pk)
        data = self.MessagePostInput(data=request.data)
        data.is_valid(raise_exception=True)
        message = services.message_post(actor=request.user, thread=thread, content=data.validated_data["content"])
        run = run_selectors.run_get_for_user(user=request.user, pk=int(message.reply_run_id))
        body = {"message": message,
                "reply_run": {"id": run.pk, "status": run.status,
                              "queue_position": run_selectors.run_queue_position(run=run)}}
        return Response(MessagePostOutputSerializer(body).data, status=status.HTTP_202_ACCEPTED,
                        headers={"Location": f"/api/v1/runs/{run.pk}/",
                                 "Retry-After": str(settings.ARBITER_API_RUN_POLL_SECONDS)})


class ThreadCompactApi(ApiView):
    @extend_schema(request=None, responses={202: OpenApiResponse(RunDetailOutputSerializer, description=RUN_ACCEPTED),
                                            **refusals(400, 403, 404, 409, 422)},
                   summary="Summarise the thread's older turns (a compaction run; originals stay stored)")
    def post(self, request, pk: int):
        run = services.thread_compact(actor=request.user, thread=_thread(request, pk))
        return run_detail_response(request, run, status_code=status.HTTP_202_ACCEPTED)


class MessageRedactApi(ApiView):
    class MessageRedactInput(serializers.Serializer):
        reason = StrictCharField(max_length=500, help_text="Why it is hidden (kept in the audit log).")

    @extend_schema(request=MessageRedactInput,
                   responses={200: MessageOutputSerializer, **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Redact a message (its author, a supervisor or an admin): it reads \"[redacted]\" everywhere")
    def post(self, request, pk: int):
        message = selectors.message_get_for_user(user=request.user, pk=pk)
        data = self.MessageRedactInput(data=request.data)
        data.is_valid(raise_exception=True)
        services.message_redact(actor=request.user, message=message, **data.validated_data)
        return Response(MessageOutputSerializer(selectors.message_get_for_user(user=request.user, pk=pk)).data)
