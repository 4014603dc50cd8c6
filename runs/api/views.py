"""REST API for runs and memory (HackSoft style, like cases.api): thin views with nested input
serializers; reads through runs.selectors (tenant-scoped: another tenant's run is 404), writes
through runs.services (one call per request), errors as {code, detail, fields?} through
core.api.exception_handler.

Starting, resuming and forking answer 202 Accepted: the run is queued and executed by workers;
GET /runs/<id>/ says where it stands (queue position while queued)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from cases import selectors as case_selectors
from cases.api.views import SelectorListApi, refusals
from core.errors import Invalid, NotFound
from runs import selectors, services
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
    """A run with where it stands: its queue position while queued, and the tenant's cap."""
    fresh = selectors.run_get_for_user(user=request.user, pk=run.pk)
    queue = selectors.run_queue_facts(run=fresh)
    return Response(RunDetailOutputSerializer(fresh, context={"queue": queue}).data, status=status_code)


class BudgetInput(serializers.Serializer):
    max_steps = serializers.IntegerField(min_value=1, required=False)
    max_tokens = serializers.IntegerField(min_value=1, required=False)
    max_wall_seconds = serializers.IntegerField(min_value=1, required=False)


class RunListStartApi(SelectorListApi):
    queryset = AgentRun.objects.none()
    filterset_class = RunFilter
    output_serializer_class = RunOutputSerializer

    class RunStartInput(serializers.Serializer):
        case = serializers.CharField(max_length=40, help_text="The case reference, e.g. CASE-2026-000042.")
        graph = serializers.ChoiceField(choices=STARTABLE_GRAPHS, default="case_analysis")
        provider = serializers.CharField(max_length=60, required=False, allow_null=True, default=None,
                                         help_text="A model provider name (default: the server's setting).")
        budget = BudgetInput(required=False, allow_null=True, default=None)

    serializer_class = RunStartInput

    def select(self, request, **params):
        queryset = selectors.run_list_for_user(user=request.user, status=params.get("status"),
                                               thread_id=params.get("thread"))
        if params.get("case"):
            queryset = queryset.filter(case__reference=params["case"])  # still within the user's tenant
        if params.get("graph"):
            queryset = queryset.filter(graph=params["graph"])
        return queryset.select_related("forked_from_checkpoint").order_by("-id")

    @extend_schema(responses=RunOutputSerializer(many=True), summary="List the tenant's runs")
    def get(self, request):
        return self.list_response(request)

    @extend_schema(request=RunStartInput, responses={202: RunDetailOutputSerializer, **refusals(400, 403)},
                   summary="Start a run on a case (queued; agents propose, nothing changes on the case)")
    def post(self, request):
        data = self.RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            case = case_selectors.case_get_for_user(user=request.user, reference=values["case"])
        except NotFound:
            raise Invalid("No such case.", fields={"case": [f"There is no case {values['case']} in your "
                                                            f"organisation."]}) from None
        run = services.run_start(actor=request.user, case=case, graph=values["graph"], provider=values["provider"],
                                 budget=values["budget"])
        return run_detail_response(request, run, status_code=status.HTTP_202_ACCEPTED)


class RunDetailApi(APIView):
    @extend_schema(responses={200: RunDetailOutputSerializer, **refusals(404)},
                   summary="A run: status, phase, budget and usage, lease, error, fork origin, queue position")
    def get(self, request, pk: int):
        return run_detail_response(request, _run(request, pk))


class RunStepListApi(SelectorListApi):
    queryset = Step.objects.none()
    output_serializer_class = StepOutputSerializer
    filter_backends = []

    def list_response(self, request, **kwargs):
        page = self.paginate_queryset(self.select(request, **kwargs))
        return self.get_paginated_response(self.output_serializer_class(page, many=True).data)

    def select(self, request, *, pk: int):
        return selectors.run_steps(run=_run(request, pk))

    @extend_schema(responses={200: StepOutputSerializer(many=True), **refusals(404)},
                   summary="A run's steps, in order")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunStepModelCallListApi(RunStepListApi):
    queryset = ModelCall.objects.none()
    output_serializer_class = ModelCallOutputSerializer

    def select(self, request, *, pk: int, sequence: int):
        run = _run(request, pk)
        calls = selectors.run_model_calls_at(run=run, sequence=sequence)
        if not calls.exists() and not selectors.run_steps(run=run).filter(sequence=sequence).exists():
            raise NotFound(f"Run R{run.pk} has no step {sequence}.")
        return calls

    @extend_schema(responses={200: ModelCallOutputSerializer(many=True), **refusals(404)},
                   summary="What the model saw at a step: messages, context, source refs, raw and validated output")
    def get(self, request, pk: int, sequence: int):
        return self.list_response(request, pk=pk, sequence=sequence)


class RunOutputListApi(RunStepListApi):
    """A list from what the run produced (runs.selectors.run_outcome), with each item's step."""

    part = ""

    def select(self, request, *, pk: int):
        produced = selectors.run_outcome(run=_run(request, pk))
        sequences = {step.pk: step.sequence for step in produced["steps"]}
        items = produced[self.part]
        for item in items:
            item.step_sequence = sequences.get(item.step_id)
        return items


class RunToolCallListApi(RunOutputListApi):
    queryset = ToolCall.objects.none()
    output_serializer_class = ToolCallOutputSerializer
    part = "tool_calls"

    @extend_schema(responses={200: ToolCallOutputSerializer(many=True), **refusals(404)},
                   summary="A run's tool calls: effect type, idempotency key, policy decision, status, result")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunFindingListApi(RunOutputListApi):
    queryset = Finding.objects.none()
    output_serializer_class = FindingOutputSerializer
    part = "findings"

    @extend_schema(responses={200: FindingOutputSerializer(many=True), **refusals(404)},
                   summary="A run's findings")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunArtifactListApi(RunOutputListApi):
    queryset = Artifact.objects.none()
    output_serializer_class = ArtifactOutputSerializer
    part = "artifacts"

    @extend_schema(responses={200: ArtifactOutputSerializer(many=True), **refusals(404)},
                   summary="A run's artifacts, with provenance (source refs, content hash, producer)")
    def get(self, request, pk: int):
        return self.list_response(request, pk=pk)


class RunCancelApi(APIView):
    class RunCancelInput(serializers.Serializer):
        reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)

    @extend_schema(request=RunCancelInput, responses={200: RunDetailOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Cancel a run (now, or at the end of the step in progress)")
    def post(self, request, pk: int):
        run = _run(request, pk)
        data = self.RunCancelInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_cancel(actor=request.user, run=run, **data.validated_data)
        return run_detail_response(request, run)


class RunResumeApi(APIView):
    class RunResumeInput(serializers.Serializer):
        budget = BudgetInput(required=False, allow_null=True, default=None,
                             help_text="Raise the limits that ended a run (e.g. after budget_exhausted).")

    @extend_schema(request=RunResumeInput, responses={202: RunDetailOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Resume a waiting, failed or stuck run from its last checkpoint")
    def post(self, request, pk: int):
        run = _run(request, pk)
        data = self.RunResumeInput(data=request.data)
        data.is_valid(raise_exception=True)
        run = services.run_resume(actor=request.user, run=run, budget=data.validated_data["budget"])
        return run_detail_response(request, run, status_code=status.HTTP_202_ACCEPTED)


class RunForkApi(APIView):
    class RunForkInput(serializers.Serializer):
        from_step = serializers.IntegerField(min_value=0, help_text="Fork from the checkpoint after this step "
                                                                    "(0 = the start).")
        provider = serializers.CharField(max_length=60, required=False, allow_null=True, default=None)
        budget = BudgetInput(required=False, allow_null=True, default=None)

    @extend_schema(request=RunForkInput, responses={202: RunDetailOutputSerializer, **refusals(400, 403, 404, 409)},
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


class MemoryListApi(SelectorListApi):
    queryset = MemoryRecord.objects.none()
    filterset_class = MemoryFilter
    output_serializer_class = MemoryOutputSerializer

    def select(self, request, **params):
        return selectors.memory_list_for_user(user=request.user, status=params.get("status"),
                                              subject=params.get("subject")) \
            .select_related("decided_by").order_by("-created_at", "-id")

    @extend_schema(responses=MemoryOutputSerializer(many=True),
                   summary="The tenant's governed memory (proposed, active, expired, rejected, forgotten)")
    def get(self, request):
        return self.list_response(request)


class MemoryDetailApi(APIView):
    @extend_schema(responses={200: MemoryOutputSerializer, **refusals(404)}, summary="A memory record")
    def get(self, request, pk: int):
        return Response(MemoryOutputSerializer(_memory(request, pk)).data)


class MemoryConfirmApi(APIView):
    class MemoryConfirmInput(serializers.Serializer):
        note = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)

    @extend_schema(request=MemoryConfirmInput, responses={200: MemoryOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Confirm a proposed memory (the person it is about, or a supervisor)")
    def post(self, request, pk: int):
        memory = _memory(request, pk)
        data = self.MemoryConfirmInput(data=request.data)
        data.is_valid(raise_exception=True)
        memory = services.memory_confirm(actor=request.user, memory=memory, **data.validated_data)
        return Response(MemoryOutputSerializer(memory).data)


class MemoryForgetApi(APIView):
    class MemoryForgetInput(serializers.Serializer):
        reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)

    @extend_schema(request=MemoryForgetInput, responses={200: MemoryOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Reject a proposed memory or forget an active one (it never enters a context again)")
    def post(self, request, pk: int):
        memory = _memory(request, pk)
        data = self.MemoryForgetInput(data=request.data)
        data.is_valid(raise_exception=True)
        memory = services.memory_forget(actor=request.user, memory=memory, **data.validated_data)
        return Response(MemoryOutputSerializer(memory).data)
