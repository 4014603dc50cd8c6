"""REST API views (HackSoft style): thin views with nested input serializers; reads through the
tenant-scoped selectors, writes through cases.services, errors through core.api.exception_handler
as {code, detail, fields?}.

A person's refusal is always one of: 400 invalid (with fields), 403 forbidden (role), 404 not
found (including another tenant's object), 409 not_allowed / stale / conflict."""

from __future__ import annotations

from django.http import JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import AuditEvent
from audit.selectors import audit_events_for_tenant
from cases import selectors, services
from cases.api.filters import AuditEventFilter, CaseFilter, NoticeFilter, ProposalFilter
from cases.api.serializers import (
    AuditEventOutputSerializer,
    CaseEventOutputSerializer,
    CaseListOutputSerializer,
    CaseOutputSerializer,
    ErrorOutputSerializer,
    EvidenceOutputSerializer,
    NoticeOutputSerializer,
    ProposalOutputSerializer,
)
from cases.models import CASE_TRANSITIONS, Case, CaseEvent, Evidence, Notice, Proposal, ProposalKind
from core.errors import Forbidden

AUDIT_FORBIDDEN = "The audit log is open to auditors, supervisors and administrators only."


def refusals(*codes: int) -> dict:
    """The error responses an operation can give, for the schema."""
    text = {400: "Invalid input; `fields` says which field and why.", 403: "Your role may not do this.",
            404: "No such object for your tenant.", 409: "Not possible in the current state, stale, or conflicting."}
    return {code: OpenApiResponse(ErrorOutputSerializer, description=text[code]) for code in codes}


class SelectorListApi(GenericAPIView):
    """A paginated list read through a selector. `filterset_class` validates (400 with fields)
    and documents the query parameters; `select()` returns the tenant-scoped queryset. The class
    `queryset` is an empty one, there only so the schema generator knows the model."""

    filterset_class = None
    output_serializer_class = None

    def select(self, request, **params):
        raise NotImplementedError

    def list_response(self, request, **kwargs):
        params = self.filterset_class(data=request.query_params, queryset=self.queryset)
        if not params.is_valid():
            raise ValidationError(params.errors)
        cleaned = {key: value for key, value in params.form.cleaned_data.items() if value not in ("", None)}
        queryset = self.select(request, **cleaned, **kwargs)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.output_serializer_class(page, many=True).data)


def _case(request, reference: str) -> Case:
    return selectors.case_get_for_user(user=request.user, reference=reference)


# --- cases ------------------------------------------------------------------------------------

class CaseListCreateApi(SelectorListApi):
    queryset = Case.objects.none()
    filterset_class = CaseFilter
    output_serializer_class = CaseListOutputSerializer

    class CaseCreateInput(serializers.Serializer):
        title = serializers.CharField(max_length=300)
        product = serializers.CharField(max_length=200, required=False, allow_blank=True)
        sub_product = serializers.CharField(max_length=200, required=False, allow_blank=True)
        issue = serializers.CharField(max_length=300, required=False, allow_blank=True)
        sub_issue = serializers.CharField(max_length=300, required=False, allow_blank=True)
        company = serializers.CharField(max_length=200, required=False, allow_blank=True)
        consumer_state = serializers.CharField(max_length=10, required=False, allow_blank=True)
        tags = serializers.CharField(max_length=200, required=False, allow_blank=True)
        complainant_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
        complainant_email = serializers.EmailField(required=False, allow_blank=True)
        source = serializers.CharField(max_length=100, required=False, allow_blank=True)
        source_reference = serializers.CharField(max_length=100, required=False, allow_blank=True)
        received_at = serializers.DateField(required=False, allow_null=True)
        narrative = serializers.CharField(required=False, allow_blank=True,
                                          help_text="Becomes the case's first text evidence.")

    serializer_class = CaseCreateInput  # for the browsable API's form

    def select(self, request, **params):
        return selectors.case_list_for_user(user=request.user, status=params.get("status"),
                                            risk_level=params.get("risk_level"), search=params.get("search")) \
            .order_by("-created_at", "-id")  # the pending-proposals annotation drops the default ordering

    @extend_schema(responses=CaseListOutputSerializer(many=True), summary="List the tenant's cases")
    def get(self, request):
        return self.list_response(request)

    @extend_schema(request=CaseCreateInput, responses={201: CaseOutputSerializer, **refusals(400, 403)},
                   summary="Open a case")
    def post(self, request):
        data = self.CaseCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        case = services.case_create(actor=request.user, tenant=request.user.tenant, **data.validated_data)
        return Response(CaseOutputSerializer(case).data, status=status.HTTP_201_CREATED)


class CaseDetailApi(APIView):
    @extend_schema(responses={200: CaseOutputSerializer, **refusals(404)}, summary="A case by its reference")
    def get(self, request, reference: str):
        return Response(CaseOutputSerializer(_case(request, reference)).data)


class CaseTransitionApi(APIView):
    class CaseTransitionInput(serializers.Serializer):
        transition = serializers.ChoiceField(choices=CASE_TRANSITIONS)
        reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000,
                                       help_text="Required for reopen, decide and return_to_review.")
        expected_version = serializers.IntegerField(
            required=False, min_value=1, allow_null=True, default=None,
            help_text="The version you looked at; if the case changed since, the answer is 409 conflict.")
        # Issue 7 (i7): deciding/closing a case on which no notice was sent needs a confirmation.
        confirm_reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000,
                                               help_text="Why decide/close although no notice was sent.")

    @extend_schema(request=CaseTransitionInput, responses={200: CaseOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Move a case through its lifecycle")
    def post(self, request, reference: str):
        data = self.CaseTransitionInput(data=request.data)
        data.is_valid(raise_exception=True)
        case = services.case_transition(actor=request.user, case=_case(request, reference), **data.validated_data)
        return Response(CaseOutputSerializer(case).data)


class CaseEventListApi(SelectorListApi):
    queryset = CaseEvent.objects.none()
    output_serializer_class = CaseEventOutputSerializer
    filter_backends = []  # no query parameters

    def select(self, request, *, reference: str):
        return selectors.case_events_for_user(user=request.user, case=_case(request, reference))

    def list_response(self, request, **kwargs):
        page = self.paginate_queryset(self.select(request, **kwargs))
        return self.get_paginated_response(self.output_serializer_class(page, many=True).data)

    @extend_schema(responses={200: CaseEventOutputSerializer(many=True), **refusals(404)},
                   summary="A case's domain events, in order")
    def get(self, request, reference: str):
        return self.list_response(request, reference=reference)


# --- evidence ---------------------------------------------------------------------------------

class EvidenceListCreateApi(SelectorListApi):
    """List a case's evidence, or add text evidence (JSON). Files go to evidence/upload/."""

    queryset = Evidence.objects.none()
    output_serializer_class = EvidenceOutputSerializer
    filter_backends = []
    parser_classes = [JSONParser, FormParser]

    class EvidenceTextInput(serializers.Serializer):
        title = serializers.CharField(max_length=300)
        text = serializers.CharField(trim_whitespace=False)
        source = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    serializer_class = EvidenceTextInput

    def list_response(self, request, **kwargs):
        page = self.paginate_queryset(self.select(request, **kwargs))
        return self.get_paginated_response(self.output_serializer_class(page, many=True).data)

    def select(self, request, *, reference: str):
        return selectors.evidence_list_for_case(user=request.user, case=_case(request, reference)) \
            .select_related("case")

    @extend_schema(responses={200: EvidenceOutputSerializer(many=True), **refusals(404)},
                   summary="A case's evidence")
    def get(self, request, reference: str):
        return self.list_response(request, reference=reference)

    @extend_schema(request=EvidenceTextInput, responses={201: EvidenceOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Add text evidence")
    def post(self, request, reference: str):
        case = _case(request, reference)
        data = self.EvidenceTextInput(data=request.data)
        data.is_valid(raise_exception=True)
        evidence = services.evidence_add(actor=request.user, case=case, **data.validated_data)
        return Response(EvidenceOutputSerializer(evidence).data, status=status.HTTP_201_CREATED)


class EvidenceUploadApi(APIView):
    parser_classes = [MultiPartParser]

    class EvidenceUploadInput(serializers.Serializer):
        title = serializers.CharField(max_length=300)
        file = serializers.FileField(help_text="Size limit and allowed content types are set by the operator "
                                               "(EVIDENCE_MAX_BYTES, EVIDENCE_ALLOWED_CONTENT_TYPES).")
        source = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")

    @extend_schema(request={"multipart/form-data": EvidenceUploadInput},
                   responses={201: EvidenceOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Upload a file as evidence")
    def post(self, request, reference: str):
        case = _case(request, reference)
        data = self.EvidenceUploadInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        evidence = services.evidence_add(actor=request.user, case=case, title=values["title"],
                                         upload=values["file"], source=values["source"])
        return Response(EvidenceOutputSerializer(evidence).data, status=status.HTTP_201_CREATED)


# --- proposals --------------------------------------------------------------------------------

class ProposalListApi(SelectorListApi):
    queryset = Proposal.objects.none()
    filterset_class = ProposalFilter
    output_serializer_class = ProposalOutputSerializer

    def select(self, request, **params):
        queryset = selectors.proposal_list_for_user(user=request.user, status=params.get("status"))
        if params.get("kind"):
            queryset = queryset.filter(kind=params["kind"])
        if params.get("case"):
            queryset = queryset.filter(case__reference=params["case"])  # still within the user's tenant
        return queryset

    @extend_schema(responses=ProposalOutputSerializer(many=True), summary="List proposals")
    def get(self, request):
        return self.list_response(request)


class ProposalCreateApi(APIView):
    class ProposalCreateInput(serializers.Serializer):
        kind = serializers.ChoiceField(choices=ProposalKind.choices)
        payload = serializers.DictField(
            help_text='status_transition: {"transition": "mark_ready", "reason"?: "..."}; '
                      'risk_level: {"risk_level": "high"}; assignment: {"team": "...", "assignee_id": 3}.')
        rationale = serializers.CharField(max_length=10000)
        evidence_refs = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False,
                                              default=list)
        idempotency_key = serializers.CharField(max_length=200, required=False, allow_null=True, default=None,
                                                help_text="A repeated request with the same key returns the "
                                                          "first proposal instead of making another.")

    @extend_schema(request=ProposalCreateInput, responses={201: ProposalOutputSerializer, **refusals(400, 403, 404)},
                   summary="Propose a change to a case")
    def post(self, request, reference: str):
        case = _case(request, reference)
        data = self.ProposalCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = services.proposal_create(actor=request.user, case=case, **data.validated_data)
        return Response(ProposalOutputSerializer(proposal).data, status=status.HTTP_201_CREATED)


class ProposalDetailApi(APIView):
    @extend_schema(responses={200: ProposalOutputSerializer, **refusals(404)}, summary="A proposal")
    def get(self, request, pk: int):
        return Response(ProposalOutputSerializer(selectors.proposal_get_for_user(user=request.user, pk=pk)).data)


class ProposalApproveApi(APIView):
    class ProposalApproveInput(serializers.Serializer):
        note = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
        # Issue 7 (i7): the case version the approver saw (a later change is a 409 conflict), the
        # evidence ids in view (recorded on the approval), and the confirmation deciding/closing
        # needs when no notice was sent.
        expected_version = serializers.IntegerField(required=False, min_value=1, default=None, allow_null=True)
        evidence_seen = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False,
                                             default=None, allow_null=True, max_length=10000)
        confirm_reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)

    @extend_schema(request=ProposalApproveInput, responses={200: ProposalOutputSerializer, **refusals(403, 404, 409)},
                   summary="Approve a proposal and apply it to the case (supervisors; not the proposer)")
    def post(self, request, pk: int):
        proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
        data = self.ProposalApproveInput(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = services.proposal_approve(actor=request.user, proposal=proposal, **data.validated_data)
        return Response(ProposalOutputSerializer(proposal).data)


class ProposalRejectApi(APIView):
    class ProposalRejectInput(serializers.Serializer):
        note = serializers.CharField(max_length=5000, help_text="Why it is rejected (required).")

    @extend_schema(request=ProposalRejectInput, responses={200: ProposalOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Reject a proposal (supervisors; not the proposer)")
    def post(self, request, pk: int):
        proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
        data = self.ProposalRejectInput(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = services.proposal_reject(actor=request.user, proposal=proposal, **data.validated_data)
        return Response(ProposalOutputSerializer(proposal).data)


class ProposalWithdrawApi(APIView):
    @extend_schema(request=None, responses={200: ProposalOutputSerializer, **refusals(403, 404, 409)},
                   summary="Withdraw a pending proposal (its proposer or a supervisor)")
    def post(self, request, pk: int):
        proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
        proposal = services.proposal_withdraw(actor=request.user, proposal=proposal)
        return Response(ProposalOutputSerializer(proposal).data)


# --- notices ----------------------------------------------------------------------------------

class NoticeListApi(SelectorListApi):
    queryset = Notice.objects.none()
    filterset_class = NoticeFilter
    output_serializer_class = NoticeOutputSerializer

    def select(self, request, **params):
        queryset = selectors.notice_list_for_user(user=request.user, status=params.get("status"))
        if params.get("case"):
            queryset = queryset.filter(case__reference=params["case"])  # still within the user's tenant
        return queryset

    @extend_schema(responses=NoticeOutputSerializer(many=True), summary="List notices")
    def get(self, request):
        return self.list_response(request)


class NoticeDraftApi(APIView):
    class NoticeDraftInput(serializers.Serializer):
        recipient = serializers.EmailField(required=False, allow_blank=True, default="",
                                           help_text="Defaults to the complainant's email.")
        subject = serializers.CharField(max_length=300)
        body = serializers.CharField(trim_whitespace=False)
        kind = serializers.CharField(max_length=50, required=False, default="response")
        idempotency_key = serializers.CharField(max_length=200, required=False, allow_null=True, default=None)

    @extend_schema(request=NoticeDraftInput, responses={201: NoticeOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Draft a notice (nothing is sent)")
    def post(self, request, reference: str):
        case = _case(request, reference)
        data = self.NoticeDraftInput(data=request.data)
        data.is_valid(raise_exception=True)
        notice = services.notice_draft(actor=request.user, case=case, **data.validated_data)
        return Response(NoticeOutputSerializer(notice).data, status=status.HTTP_201_CREATED)


class NoticeDetailApi(APIView):
    class NoticeEditInput(serializers.Serializer):
        recipient = serializers.EmailField(required=False)
        subject = serializers.CharField(max_length=300, required=False)
        body = serializers.CharField(required=False, trim_whitespace=False)

        def validate(self, attrs):
            if not attrs:
                raise serializers.ValidationError("Send at least one of recipient, subject, body.")
            return attrs

    @extend_schema(responses={200: NoticeOutputSerializer, **refusals(404)}, summary="A notice")
    def get(self, request, pk: int):
        return Response(NoticeOutputSerializer(selectors.notice_get_for_user(user=request.user, pk=pk)).data)

    @extend_schema(request=NoticeEditInput, responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Edit a notice: it returns to draft and its approvals are voided")
    def patch(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        data = self.NoticeEditInput(data=request.data)
        data.is_valid(raise_exception=True)
        notice = services.notice_edit(actor=request.user, notice=notice, **data.validated_data)
        return Response(NoticeOutputSerializer(notice).data)


class NoticeSubmitApi(APIView):
    @extend_schema(request=None, responses={200: NoticeOutputSerializer, **refusals(403, 404, 409)},
                   summary="Submit a draft notice for approval")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        return Response(NoticeOutputSerializer(services.notice_submit(actor=request.user, notice=notice)).data)


class NoticeApproveApi(APIView):
    class NoticeApproveInput(serializers.Serializer):
        content_hash = serializers.CharField(max_length=64, help_text="The content_hash of the text you reviewed; "
                                                                      "if the notice changed since, 409 stale.")
        note = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
        # Issue 7 (i7): approving over the notice checker's flags needs a reason.
        override_reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000,
                                                help_text="Required when the notice checker flagged the text.")

    @extend_schema(request=NoticeApproveInput, responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Approve the exact text of a notice (supervisors; not its drafter or editor)")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        data = self.NoticeApproveInput(data=request.data)
        data.is_valid(raise_exception=True)
        notice = services.notice_approve(actor=request.user, notice=notice, **data.validated_data)
        return Response(NoticeOutputSerializer(notice).data)


class NoticeRejectApi(APIView):
    class NoticeRejectInput(serializers.Serializer):
        note = serializers.CharField(max_length=5000, help_text="Why it is rejected (required).")

    @extend_schema(request=NoticeRejectInput, responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409)},
                   summary="Reject a notice pending approval")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        data = self.NoticeRejectInput(data=request.data)
        data.is_valid(raise_exception=True)
        notice = services.notice_reject(actor=request.user, notice=notice, **data.validated_data)
        return Response(NoticeOutputSerializer(notice).data)


class NoticeWithdrawApi(APIView):
    @extend_schema(request=None, responses={200: NoticeOutputSerializer, **refusals(403, 404, 409)},
                   summary="Withdraw a notice that has not been sent")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        return Response(NoticeOutputSerializer(services.notice_withdraw(actor=request.user, notice=notice)).data)


class NoticeDispatchApi(APIView):
    @extend_schema(request=None, responses={202: NoticeOutputSerializer, **refusals(403, 404, 409)},
                   summary="Send an approved notice (queued; sent exactly once by the worker)")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        notice = services.notice_dispatch_request(actor=request.user, notice=notice)
        return Response(NoticeOutputSerializer(notice).data, status=status.HTTP_202_ACCEPTED)


# --- audit ------------------------------------------------------------------------------------

class AuditEventListApi(SelectorListApi):
    queryset = AuditEvent.objects.none()
    filterset_class = AuditEventFilter
    output_serializer_class = AuditEventOutputSerializer

    def select(self, request, **params):
        case_id = _case(request, params["case"]).pk if params.get("case") else None
        return audit_events_for_tenant(tenant_id=request.user.tenant_id, case_id=case_id,
                                       run_id=params.get("run_id"), action=params.get("action"))

    @extend_schema(responses={200: AuditEventOutputSerializer(many=True), **refusals(403)},
                   summary="Audit events of the tenant (auditors, supervisors, admins)")
    def get(self, request):
        if not request.user.can_see_audit:
            raise Forbidden(AUDIT_FORBIDDEN)
        return self.list_response(request)



def api_not_found(request, *args, **kwargs):
    """Unknown addresses under /api/ answer in the API's error format, not with an HTML page."""
    return JsonResponse({"code": "not_found", "detail": f"No API endpoint at {request.path}; "
                                                        f"the endpoints are listed at /api/docs/."}, status=404)
