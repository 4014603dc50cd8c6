"""REST API for runs and memory (HackSoft style, like cases.api): thin views with nested input
serializers; reads through runs.selectors (tenant-scoped: another tenant's run is 404), writes
through runs.services (one call per request), errors as {code, detail, fields?} through
core.api.exception_handler.

Starting, resuming and forking answer 202 Accepted: the run is queued and executed by workers;
GET /runs/<id>/ says where it stands (queue position while queued)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import F
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from cases import selectors as case_selectors
from core.api import INT_MAX, KnownFieldsOnly, refusals
from core.api_base import ApiView, ListApi, RunStartThrottle
from core.api_fields import StrictCharField
from core.errors import NotFound
from runs import providers, selectors, services
from runs.api.filters import MemoryFilter, RunFilter
from runs.api.serializers import (
    ArtifactOutputSerializer,
    FindingOutputSerializer,
    MemoryOutputSerializer,
    ModelCallOutputSerializer,
    RunDetailOutputSerializer,
    RunOutputSerializer,
    StepOutputSerializer,
    ToolCallOutputSerializer,
)
from runs.models import AgentRun, Artifact, Finding, MemoryRecord, ModelCall, Step, ToolCall

# Graphs a client starts on a case. Chat and compaction runs start from a thread
# (POST /threads/<id>/messages/ and /threads/<id>/compact/), which gives them their input.
STARTABLE_GRAPHS = ("case_analysis",)


def _run(request, pk: int) -> AgentRun:
    return selectors.run_get_for_user(user=request.user, pk=pk)


def run_detail_response(request, run: AgentRun, *, status_code: int = status.HTTP_200_OK) -> Response:
    """A run with where it stands: its queue position while queued, and the tenant's cap. A 202
    (queued) carries the run's address in Location and a polling hint in Retry-After."""
    fresh = selectors.run_get_for_user(user=request.user, pk=run.pk)
    queue = selectors.run_queue_facts(run=fresh)
    response = Response(RunDetailOutputSerializer(fresh, context={"queue": queue}).data, status=status_code)
    if status_code == status.HTTP_202_ACCEPTED:
        response["Location"] = f"/api/v1/runs/{fresh.pk}/"
        response["Retry-After"] = str(settings.ARBITER_API_RUN_POLL_SECONDS)
    return response


PROVIDER_HELP = ("A model provider name (default: the server's setting). The names are the providers this "
                 "deployment has configured and can use now; the list is generated with the server's settings.")
RUN_ACCEPTED = ("Queued: the run's address is in `Location`; poll it after the seconds in `Retry-After`.")

_CEILINGS = {"max_steps": "ARBITER_API_MAX_RUN_STEPS", "max_tokens": "ARBITER_API_MAX_RUN_TOKENS",
             "max_wall_seconds": "ARBITER_API_MAX_RUN_WALL_SECONDS"}


class BudgetInput(KnownFieldsOnly, serializers.Serializer):
    """Budget limits a client may ask for, each at most the server's ceiling (a setting)."""

    max_steps = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False,
        help_text=f"At most ARBITER_API_MAX_RUN_STEPS (here {settings.ARBITER_API_MAX_RUN_STEPS}).")
    max_tokens = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False,
        help_text=f"At most ARBITER_API_MAX_RUN_TOKENS (here {settings.ARBITER_API_MAX_RUN_TOKENS}).")
    max_wall_seconds = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False,
        help_text=f"At most ARBITER_API_MAX_RUN_WALL_SECONDS (here {settings.ARBITER_API_MAX_RUN_WALL_SECONDS}).")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, setting in _CEILINGS.items():  # the schema states the ceiling in force (validate enforces it)
            self.fields[name].max_value = min(getattr(settings, setting), INT_MAX)

    def validate(self, attrs):
        errors = {}
        for name, setting in _CEILINGS.items():
            ceiling = getattr(settings, setting)
            if name in attrs and attrs[name] > ceiling:
                errors[name] = [f"Ensure this value is less than or equal to {ceiling} (the server's ceiling)."]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class RunListStartApi(ListApi):
    queryset = AgentRun.objects.none()
    filterset_class = RunFilter
    output_serializer_class = RunOutputSerializer
    ordering_fields = ("-id", "id", "updated_at")
    updated_field = "updated_at"
    throttle_classes = [RunStartThrottle]

    class RunStartInput(serializers.Serializer):
        case = StrictCharField(max_length=40, help_text="The case reference, e.g. CASE-2026-000042.")
        graph = serializers.ChoiceField(choices=STARTABLE_GRAPHS, default="case_analysis")
        provider = serializers.ChoiceField(choices=(), required=False, allow_null=True, default=None,
                                           help_text=PROVIDER_HELP)
        budget = BudgetInput(required=False, allow_null=True, default=None)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.fields["provider"].choices = providers.usable_provider_names()

    serializer_class = RunStartInput

    def select(self, request, **params):
        queryset = selectors.run_list_for_user(user=request.user, status=params.get("status"),
                                               thread_id=params.get("thread"))
        if params.get("case"):
            queryset = queryset.filter(case__reference=params["case"])  # still within the user's tenant
        if params.get("graph"):
            queryset = queryset.filter(graph=params["graph"])
        return selectors.with_completed_nodes(queryset.select_related("forked_from_checkpoint"))

    @extend_schema(responses={200: RunOutputSerializer(many=True), **refusals(400)}, summary="List the tenant's runs")
    def get(self, request):
        return self.list_response(request)

    @extend_schema(request=RunStartInput,
                   responses={202: OpenApiResponse(RunDetailOutputSerializer, description=RUN_ACCEPTED),
                              **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Start a run on a case (queued; agents propose, nothing changes on the case)")
    def post(self, request):
        data = self.RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            case = case_selectors.case_get_for_user(user=request.user, reference=values["case"])
        except NotFound:
            raise NotFound("No such case.", fields={"case": [f"There is no case {values['case']} in your "
                                                            f"organisation."]}) from None
        run = services.run_start(actor=request.user, case=case, graph=values["graph"], provider=values["provider"],
                                 budget=values["budget"])
        return run_detail_response(request, run, status_code=status.HTTP_202_ACCEPTED)


class RunDetailApi(ApiView):
    @extend_schema(responses={200: RunDetailOutputSerializer, **refusals(400, 404)},
                   summary="A run: status, phase, budget and usage, lease, error, fork origin, queue position")
    def get(self, request, pk: int):
        return run_detail_response(request, _run(request, pk))


class RunStepListApi(ListApi):
    queryset = Step.objects.none()
    output_serializer_class = StepOutputSerializer
    ordering_fields = ("sequence",)

    def select(self, request, *, pk: int):
        return selectors.run_steps(run=_run(request, pk))

    @extend_schema(responses={200: StepOutputSerializer(many=True), **refusals(400, 404)},
                   summary="A run's steps, in order")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunStepModelCallListApi(RunStepListApi):
    queryset = ModelCall.objects.none()
    output_serializer_class = ModelCallOutputSerializer
    ordering_fields = ("id",)

    def select(self, request, *, pk: int, sequence: int):
        run = _run(request, pk)
        calls = selectors.run_model_calls_at(run=run, sequence=sequence)
        if not calls.exists() and not selectors.run_steps(run=run).filter(sequence=sequence).exists():
            raise NotFound(f"Run R{run.pk} has no step {sequence}.")
        return calls

    @extend_schema(responses={200: ModelCallOutputSerializer(many=True), **refusals(400, 404)},
                   summary="What the model saw at a step: messages, context, source refs, raw and validated output")
    def get(self, request, pk: int, sequence: int):
        return self.list_response(request, pk=pk, sequence=sequence)


class RunOutputListApi(RunStepListApi):
    """A list from what the run produced (runs.selectors.run_outcome), with each item's step."""

    part = ""
    ordering_fields = ("id",)

    def select(self, request, *, pk: int):
        # The same rows as runs.selectors.run_outcome, as a queryset so the list pages by cursor.
        return getattr(_run(request, pk), self.part).annotate(step_sequence=F("step__sequence"))


class RunToolCallListApi(RunOutputListApi):
    queryset = ToolCall.objects.none()
    output_serializer_class = ToolCallOutputSerializer
    part = "tool_calls"

    @extend_schema(responses={200: ToolCallOutputSerializer(many=True), **refusals(400, 404)},
                   summary="A run's tool calls: effect type, idempotency key, policy decision, status, result")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunFindingListApi(RunOutputListApi):
    queryset = Finding.objects.none()
    output_serializer_class = FindingOutputSerializer
    part = "findings"

    @extend_schema(responses={200: FindingOutputSerializer(many=True), **refusals(400, 404)},
                   summary="A run's findings")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunArtifactListApi(RunOutputListApi):
    queryset = Artifact.objects.none()
    output_serializer_class = ArtifactOutputSerializer
    part = "artifacts"

    @extend_schema(responses={200: ArtifactOutputSerializer(many=True), **refusals(400, 404)},
                   summary="A run's artifacts, with provenance (source refs, content hash, producer)")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunCancelApi(ApiView):
    class RunCancelInput(serializers.Serializer):
        reason = StrictCharField(required=False, allow_blank=True, default="", max_length=500)

    @extend_schema(request=RunCancelInput,
                   responses={200: RunDetailOutputSerializer, **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Cancel a run (now, or at the end of the step in progress)")
    def post(self, request, pk: int):
        run = _run(request, pk)
        data = self.RunCancelInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_cancel(actor=request.user, run=run, **data.validated_data)
        return run_detail_response(request, run)


class RunResumeApi(ApiView):
    class RunResumeInput(serializers.Serializer):
        budget = BudgetInput(required=False, allow_null=True, default=None,
                             help_text="Raise the limits that ended a run (e.g. after budget_exhausted).")

    @extend_schema(request=RunResumeInput,
                   responses={202: OpenApiResponse(RunDetailOutputSerializer, description=RUN_ACCEPTED),
                              **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Resume a waiting, failed or stuck run from its last checkpoint")
    def post(self, request, pk: int):
        run = _run(request, pk)
        data = self.RunResumeInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_resume(actor=request.user, run=run, budget=data.validated_data["budget"])
        return run_detail_response(request, run, status_code=status.HTTP_202_ACCEPTED)


class RunForkApi(ApiView):
    class RunForkInput(serializers.Serializer):
        from_step = serializers.IntegerField(min_value=0, max_value=INT_MAX, help_text="Fork from the checkpoint after this step "
                                                                    "(0 = the start).")
        provider = serializers.ChoiceField(choices=(), required=False, allow_null=True, default=None,
                                           help_text=PROVIDER_HELP)
        budget = BudgetInput(required=False, allow_null=True, default=None)

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.fields["provider"].choices = providers.usable_provider_names()

    @extend_schema(request=RunForkInput,
                   responses={202: OpenApiResponse(RunDetailOutputSerializer, description=RUN_ACCEPTED),
                              **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Fork a run from a checkpoint: a new run reproduces steps 1..N and continues afresh")
    def post(self, request, pk: int):
        run = _run(request, pk)
        data = self.RunForkInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        fork = services.run_fork(actor=request.user, run=run, from_sequence=values["from_step"],
                                 provider=values["provider"], budget=values["budget"])
        return run_detail_response(request, fork, status_code=status.HTTP_202_ACCEPTED)


# --- memory -----------------------------------------------------------------------------------------

def _memory(request, pk: int) -> MemoryRecord:
    memory = selectors.memory_list_for_user(user=request.user).filter(pk=pk).first()
    if memory is None:
        raise NotFound("No such memory.")
    return memory


class MemoryListApi(ListApi):
    queryset = MemoryRecord.objects.none()
    filterset_class = MemoryFilter
    output_serializer_class = MemoryOutputSerializer
    ordering_fields = ("-created_at", "created_at")

    def select(self, request, **params):
        return selectors.memory_list_for_user(user=request.user, status=params.get("status"),
                                              subject=params.get("subject")) \
            .select_related("decided_by")

    @extend_schema(responses={200: MemoryOutputSerializer(many=True), **refusals(400)},
                   summary="The tenant's governed memory (proposed, active, expired, rejected, forgotten)")
    def get(self, request):
        return self.list_response(request)


class MemoryDetailApi(ApiView):
    @extend_schema(responses={200: MemoryOutputSerializer, **refusals(400, 404)}, summary="A memory record")
    def get(self, request, pk: int):
        return Response(MemoryOutputSerializer(_memory(request, pk)).data)


class MemoryConfirmApi(ApiView):
    class MemoryConfirmInput(serializers.Serializer):
        note = StrictCharField(required=False, allow_blank=True, default="", max_length=1000)

    @extend_schema(request=MemoryConfirmInput,
                   responses={200: MemoryOutputSerializer, **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Confirm a proposed memory (the person it is about, or a supervisor)")
    def post(self, request, pk: int):
        memory = _memory(request, pk)
        data = self.MemoryConfirmInput(data=request.data)
        data.is_valid(raise_exception=True)
        memory = services.memory_confirm(actor=request.user, memory=memory, **data.validated_data)
        return Response(MemoryOutputSerializer(memory).data)


class MemoryForgetApi(ApiView):
    class MemoryForgetInput(serializers.Serializer):
        reason = StrictCharField(required=False, allow_blank=True, default="", max_length=1000)

    @extend_schema(request=MemoryForgetInput,
                   responses={200: MemoryOutputSerializer, **refusals(400, 403, 404, 409, 413, 415, 422)},
                   summary="Reject a proposed memory or forget an active one (it never enters a context again)")
    def post(self, request, pk: int):
        memory = _memory(request, pk)
        data = self.MemoryForgetInput(data=request.data)
        data.is_valid(raise_exception=True)
        memory = services.memory_forget(actor=request.user, memory=memory, **data.validated_data)
        return Response(MemoryOutputSerializer(memory).data)
