"""REST API views (HackSoft style): thin views with nested input serializers; reads through the
tenant-scoped selectors, writes through cases.services, errors through core.api.exception_handler
as {code, detail, fields?}.

A person's refusal is always one of: 400 invalid (with fields), 403 forbidden (role), 404 not
found (including another tenant's object), 409 not_allowed / stale / conflict."""

from __future__ import annotations

from django.conf import settings
from django.http import FileResponse, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiRequest, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from audit.models import AuditEvent
from audit.selectors import audit_events_for_tenant
from cases import selectors, services
from cases.api.filters import AuditEventFilter, CaseFilter, NoticeFilter, ProposalFilter
from cases.api.proposal_inputs import PROPOSAL_CREATE_SCHEMA, proposal_input
from cases.api.serializers import (
    AuditEventOutputSerializer,
    CaseEventOutputSerializer,
    CaseListOutputSerializer,
    CaseOutputSerializer,
    EvidenceOutputSerializer,
    NoticeOutputSerializer,
    ProposalOutputSerializer,
)
from cases.models import CASE_TRANSITIONS, Case, CaseEvent, Evidence, Notice, Proposal
from core.api import refusals
from core.api_base import ApiView, ListApi, check_if_match, with_etag
from core.api_fields import StrictCharField, StrictEmailField
from core.api_schema import IF_MATCH_SCHEMA, NOT_BLANK_NO_NUL, ONE_LINE
from core.errors import Forbidden, NotAllowed

# The API's base list view, under the name the other apps' API modules import.
SelectorListApi = ListApi
__all__ = ["SelectorListApi", "refusals"]

AUDIT_FORBIDDEN = "The audit log is open to auditors, supervisors and administrators only."


IF_MATCH = OpenApiParameter("If-Match", IF_MATCH_SCHEMA, OpenApiParameter.HEADER, required=False,
                            description="The ETag you read (or `*`); if the object changed since, the answer is 412 "
                                        "and nothing changes.")


def _case(request, reference: str) -> Case:
    return selectors.case_get_for_user(user=request.user, reference=reference)


def created(data, location: str, *, obj=None) -> Response:
    """201 with the new object's address in `Location` (and its ETag when it has one)."""
    response = Response(data, status=status.HTTP_201_CREATED, headers={"Location": location})
    return with_etag(response, obj) if obj is not None else response


def _evidence_url(evidence: Evidence) -> str:
    return f"/api/v1/evidence/{evidence.pk}/download/"


# --- cases ------------------------------------------------------------------------------------

class CaseListCreateApi(ListApi):
    queryset = Case.objects.none()
    filterset_class = CaseFilter
    output_serializer_class = CaseListOutputSerializer
    ordering_fields = ("-created_at", "updated_at")
    updated_field = "updated_at"

    class CaseCreateInput(serializers.Serializer):
        title = StrictCharField(max_length=300)
        product = StrictCharField(max_length=200, required=False, allow_blank=True)
        sub_product = StrictCharField(max_length=200, required=False, allow_blank=True)
        issue = StrictCharField(max_length=300, required=False, allow_blank=True)
        sub_issue = StrictCharField(max_length=300, required=False, allow_blank=True)
        company = StrictCharField(max_length=200, required=False, allow_blank=True)
        consumer_state = StrictCharField(max_length=10, required=False, allow_blank=True)
        tags = StrictCharField(max_length=200, required=False, allow_blank=True)
        complainant_name = StrictCharField(max_length=200, required=False, allow_blank=True)
        complainant_email = StrictEmailField(required=False, allow_blank=True)
        source = StrictCharField(max_length=100, required=False, allow_blank=True)
        source_reference = StrictCharField(max_length=100, required=False, allow_blank=True)
        received_at = serializers.DateField(required=False, allow_null=True)
        narrative = StrictCharField(required=False, allow_blank=True, trim_whitespace=False,
                                          help_text="Becomes the case's first text evidence (the body limit, "
                                                    "ARBITER_API_MAX_BODY_BYTES, bounds it).")

    serializer_class = CaseCreateInput  # for the browsable API's form

    def select(self, request, **params):
        return selectors.case_list_for_user(user=request.user, status=params.get("status"),
                                            risk_level=params.get("risk_level"), search=params.get("search"))

    @extend_schema(responses={200: CaseListOutputSerializer(many=True), **refusals(400)},
                   summary="List the tenant's cases",
                   description="Newest first by default; `ordering=updated_at` with `updated_since` to sync changes.")
    def get(self, request):
        return self.list_response(request)

    @extend_schema(request=CaseCreateInput, responses={201: CaseOutputSerializer, **refusals(400, 403, 409, 413, 415, 422)},
                   summary="Open a case", description="Answers 201 with the case and its address in `Location`.")
    def post(self, request):
        data = self.CaseCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        case = services.case_create(actor=request.user, tenant=request.user.tenant, **data.validated_data)
        return created(CaseOutputSerializer(case).data, f"/api/v1/cases/{case.reference}/", obj=case)


class CaseDetailApi(ApiView):
    @extend_schema(responses={200: CaseOutputSerializer, **refusals(400, 404)}, summary="A case by its reference",
                   description="The `ETag` header is the case's version: send it as `If-Match` on a transition.")
    def get(self, request, reference: str):
        case = _case(request, reference)
        return with_etag(Response(CaseOutputSerializer(case).data), case)


class CaseTransitionApi(ApiView):
    honours_if_match = True
    class CaseTransitionInput(serializers.Serializer):
        transition = serializers.ChoiceField(choices=CASE_TRANSITIONS)
        reason = StrictCharField(required=False, allow_blank=True, default="", max_length=5000,
                                       help_text="Required for reopen, decide and return_to_review.")
        expected_version = serializers.IntegerField(
            required=False, min_value=1, allow_null=True, default=None,
            help_text="The version you looked at; if the case changed since, the answer is 409 conflict.")
        # Deciding/closing a case on which no notice was sent needs a confirmation.
        confirm_reason = StrictCharField(required=False, allow_blank=True, default="", max_length=5000,
                                               help_text="Why decide/close although no notice was sent.")

    @extend_schema(request=CaseTransitionInput, parameters=[IF_MATCH],
                   responses={200: CaseOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary=("Move a case through its lifecycle (decide, close, reopen: a supervisor signed in, "
                            "never an API key)"))
    def post(self, request, reference: str):
        data = self.CaseTransitionInput(data=request.data)
        data.is_valid(raise_exception=True)
        case = _case(request, reference)
        values = dict(data.validated_data)
        if request.headers.get("If-Match"):
            check_if_match(request, case)
            # The service compares the version under its row lock: If-Match is as safe as expected_version.
            values["expected_version"] = values["expected_version"] or case.version
        case = services.case_transition(actor=request.user, case=case, **values)
        return with_etag(Response(CaseOutputSerializer(case).data), case)


class CaseEventListApi(ListApi):
    queryset = CaseEvent.objects.none()
    output_serializer_class = CaseEventOutputSerializer
    ordering_fields = ("sequence",)

    def select(self, request, *, reference: str):
        return selectors.case_events_for_user(user=request.user, case=_case(request, reference))

    @extend_schema(responses={200: CaseEventOutputSerializer(many=True), **refusals(400, 404)},
                   summary="A case's domain events, in order")
    def get(self, request, reference: str):
        return self.list_response(request, reference=reference)


# --- evidence ---------------------------------------------------------------------------------

class EvidenceListCreateApi(ListApi):
    """List a case's evidence, or add text evidence (JSON). Files go to evidence/upload/."""

    honours_if_match = True

    queryset = Evidence.objects.none()
    output_serializer_class = EvidenceOutputSerializer
    ordering_fields = ("created_at", "-created_at")

    class EvidenceTextInput(serializers.Serializer):
        title = StrictCharField(max_length=300)
        text = StrictCharField(trim_whitespace=False)
        source = StrictCharField(max_length=200, required=False, allow_blank=True, default="")

    serializer_class = EvidenceTextInput

    def select(self, request, *, reference: str):
        return selectors.evidence_list_for_case(user=request.user, case=_case(request, reference)) \
            .select_related("case")

    @extend_schema(responses={200: EvidenceOutputSerializer(many=True), **refusals(400, 404)},
                   summary="A case's evidence")
    def get(self, request, reference: str):
        return self.list_response(request, reference=reference)

    @extend_schema(request=EvidenceTextInput, parameters=[IF_MATCH],
                   responses={201: EvidenceOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary="Add text evidence")
    def post(self, request, reference: str):
        case = _case(request, reference)
        check_if_match(request, case)
        data = self.EvidenceTextInput(data=request.data)
        data.is_valid(raise_exception=True)
        evidence = services.evidence_add(actor=request.user, case=case, **data.validated_data)
        return created(EvidenceOutputSerializer(evidence).data, _evidence_url(evidence))


def _refuse_repeated_parts(request) -> None:
    """Each field of the upload is one part: a repeated part (an array flattened by the multipart
    encoding) is 400 naming it, not read as its last value."""
    repeated = sorted(name for name in {*request.data.keys(), *request.FILES.keys()}
                      if len(request.data.getlist(name)) > 1 or len(request.FILES.getlist(name)) > 1)
    if repeated:
        raise serializers.ValidationError({name: ["Give this field once (one part)."] for name in repeated})


class EvidenceUploadApi(ApiView):
    honours_if_match = True
    parser_classes = [MultiPartParser]

    class EvidenceUploadInput(serializers.Serializer):
        title = StrictCharField(max_length=300)
        file = serializers.FileField(help_text="Size limit and allowed content types are set by the operator "
                                               "(EVIDENCE_MAX_BYTES, EVIDENCE_ALLOWED_CONTENT_TYPES).")
        source = StrictCharField(max_length=200, required=False, allow_blank=True, default="")

    @extend_schema(request={"multipart/form-data": OpenApiRequest(EvidenceUploadInput, encoding={
                       "file": {"contentType": ", ".join(settings.EVIDENCE_ALLOWED_CONTENT_TYPES)}})},
                   parameters=[IF_MATCH],
                   responses={201: EvidenceOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary="Upload a file as evidence")
    def post(self, request, reference: str):
        case = _case(request, reference)
        check_if_match(request, case)
        _refuse_repeated_parts(request)
        data = self.EvidenceUploadInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        evidence = services.evidence_add(actor=request.user, case=case, title=values["title"],
                                         upload=values["file"], source=values["source"])
        return created(EvidenceOutputSerializer(evidence).data, _evidence_url(evidence))


class EvidenceDownloadApi(ApiView):
    @extend_schema(responses={**{(200, media): OpenApiResponse(
                       OpenApiTypes.BINARY, description="A file: its bytes as uploaded, as application/octet-stream "
                                                        "(the type its uploader declared is the evidence's "
                                                        "`content_type`, not verified by the server); text "
                                                        "evidence: its text as text/plain.")
                       for media in ("application/octet-stream", "text/plain")},
                       **refusals(400, 404)},
                   summary="Download a piece of evidence")
    def get(self, request, pk: int):
        evidence = selectors.evidence_get_for_user(user=request.user, pk=pk)
        if evidence.file:
            # Bytes whose type only the uploader declared: served as bytes, never as that type.
            response = FileResponse(evidence.file.open("rb"), as_attachment=True,
                                    filename=evidence.filename or f"evidence-{evidence.pk}",
                                    content_type="application/octet-stream")
        else:
            response = HttpResponse(evidence.text, content_type="text/plain; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="evidence-{evidence.pk}.txt"'
        response["X-Content-Type-Options"] = "nosniff"
        return response


# --- proposals --------------------------------------------------------------------------------

class ProposalListApi(ListApi):
    queryset = Proposal.objects.none()
    filterset_class = ProposalFilter
    output_serializer_class = ProposalOutputSerializer
    ordering_fields = ("-created_at", "created_at")

    def select(self, request, **params):
        queryset = selectors.proposal_list_for_user(user=request.user, status=params.get("status"))
        if params.get("kind"):
            queryset = queryset.filter(kind=params["kind"])
        if params.get("case"):
            queryset = queryset.filter(case__reference=params["case"])  # still within the user's tenant
        return queryset

    @extend_schema(responses={200: ProposalOutputSerializer(many=True), **refusals(400)}, summary="List proposals")
    def get(self, request):
        return self.list_response(request)


class ProposalCreateApi(ApiView):
    honours_if_match = True

    @extend_schema(request=PROPOSAL_CREATE_SCHEMA, parameters=[IF_MATCH],
                   responses={201: ProposalOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary="Propose a change to a case",
                   description="The payload depends on `kind` (one body shape per kind). A body of the right shape "
                               "that the case does not allow now is 409 `not_allowed` (a transition its status does "
                               "not allow, the risk level it already has, evidence that is not this case's, an "
                               "assignee who is not an active person of your organisation).")
    def post(self, request, reference: str):
        case = _case(request, reference)
        check_if_match(request, case)
        values = proposal_input(request.data, tenant_id=request.user.tenant_id)
        proposal = services.proposal_create(actor=request.user, case=case, **values)
        return created(ProposalOutputSerializer(proposal).data, f"/api/v1/proposals/{proposal.pk}/", obj=proposal)


class ProposalDetailApi(ApiView):
    @extend_schema(responses={200: ProposalOutputSerializer, **refusals(400, 404)}, summary="A proposal")
    def get(self, request, pk: int):
        proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
        return with_etag(Response(ProposalOutputSerializer(proposal).data), proposal)


class ProposalApproveApi(ApiView):
    honours_if_match = True
    class ProposalApproveInput(serializers.Serializer):
        note = StrictCharField(required=False, allow_blank=True, default="", max_length=5000)
        # The case version the approver saw (a later change is a 409 conflict), the
        # evidence ids in view (recorded on the approval), and the confirmation deciding/closing
        # needs when no notice was sent.
        expected_version = serializers.IntegerField(required=False, min_value=1, default=None, allow_null=True)
        evidence_seen = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False,
                                             default=None, allow_null=True, max_length=10000)
        confirm_reason = StrictCharField(required=False, allow_blank=True, default="", max_length=5000)

    @extend_schema(request=ProposalApproveInput, parameters=[IF_MATCH],
                   responses={200: ProposalOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary=("Approve a proposal and apply it to the case (supervisors signed in, never an API key; "
                            "not the proposer)"))
    def post(self, request, pk: int):
        proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
        check_if_match(request, proposal)
        data = self.ProposalApproveInput(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = services.proposal_approve(actor=request.user, proposal=proposal, **data.validated_data)
        return with_etag(Response(ProposalOutputSerializer(proposal).data), proposal)


class ProposalRejectApi(ApiView):
    honours_if_match = True
    class ProposalRejectInput(serializers.Serializer):
        note = StrictCharField(max_length=5000, help_text="Why it is rejected (required).")

    @extend_schema(request=ProposalRejectInput, parameters=[IF_MATCH],
                   responses={200: ProposalOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary="Reject a proposal (supervisors signed in, never an API key; not the proposer)")
    def post(self, request, pk: int):
        proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
        check_if_match(request, proposal)
        data = self.ProposalRejectInput(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = services.proposal_reject(actor=request.user, proposal=proposal, **data.validated_data)
        return with_etag(Response(ProposalOutputSerializer(proposal).data), proposal)


class ProposalWithdrawApi(ApiView):
    honours_if_match = True
    @extend_schema(request=None, parameters=[IF_MATCH],
                   responses={200: ProposalOutputSerializer, **refusals(400, 403, 404, 409, 412, 422)},
                   summary="Withdraw a pending proposal (its proposer or a supervisor)")
    def post(self, request, pk: int):
        proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
        check_if_match(request, proposal)
        proposal = services.proposal_withdraw(actor=request.user, proposal=proposal)
        return with_etag(Response(ProposalOutputSerializer(proposal).data), proposal)


# --- notices ----------------------------------------------------------------------------------

class NoticeListApi(ListApi):
    queryset = Notice.objects.none()
    filterset_class = NoticeFilter
    output_serializer_class = NoticeOutputSerializer
    ordering_fields = ("-created_at", "updated_at")
    updated_field = "updated_at"

    def select(self, request, **params):
        queryset = selectors.notice_list_for_user(user=request.user, status=params.get("status"))
        if params.get("case"):
            queryset = queryset.filter(case__reference=params["case"])  # still within the user's tenant
        return queryset

    @extend_schema(responses={200: NoticeOutputSerializer(many=True), **refusals(400)}, summary="List notices")
    def get(self, request):
        return self.list_response(request)


class NoticeDraftApi(ApiView):
    honours_if_match = True
    class NoticeDraftInput(serializers.Serializer):
        schema_patterns = {"subject": ONE_LINE, "body": NOT_BLANK_NO_NUL}  # the service's rules (one line; a body)

        recipient = StrictEmailField(required=False, allow_blank=True,
                                           help_text="Defaults to the complainant's email.")
        subject = StrictCharField(max_length=300)
        body = StrictCharField(trim_whitespace=False)
        kind = StrictCharField(max_length=50, required=False, default="response")
        idempotency_key = StrictCharField(max_length=200, required=False, allow_null=True, default=None)

    @extend_schema(request=NoticeDraftInput, parameters=[IF_MATCH],
                   responses={201: NoticeOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary="Draft a notice (nothing is sent)")
    def post(self, request, reference: str):
        case = _case(request, reference)
        check_if_match(request, case)
        data = self.NoticeDraftInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = {"recipient": "", **data.validated_data}
        if not values["recipient"].strip() and not (case.complainant_email or "").strip():
            # Whether the case has an address is the case's state, not the request's shape: 409.
            raise NotAllowed(f"{case.reference} has no complainant email address to default to: give `recipient`.",
                             fields={"recipient": ["Required: the case has no complainant email address."]})
        notice = services.notice_draft(actor=request.user, case=case, **values)
        return created(NoticeOutputSerializer(notice).data, f"/api/v1/notices/{notice.pk}/", obj=notice)


class NoticeDetailApi(ApiView):
    honours_if_match = True
    class NoticeEditInput(serializers.Serializer):
        schema_rules = {"minProperties": 1}  # validate(): at least one field
        schema_patterns = {"subject": ONE_LINE, "body": NOT_BLANK_NO_NUL}

        recipient = StrictEmailField(required=False)
        subject = StrictCharField(max_length=300, required=False)
        body = StrictCharField(required=False, trim_whitespace=False)

        def validate(self, attrs):
            if not attrs:
                raise serializers.ValidationError("Send at least one of recipient, subject, body.")
            return attrs

    @extend_schema(responses={200: NoticeOutputSerializer, **refusals(400, 404)}, summary="A notice")
    def get(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        return with_etag(Response(NoticeOutputSerializer(notice).data), notice)

    @extend_schema(request=NoticeEditInput, parameters=[IF_MATCH],
                   responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary="Edit a notice: it returns to draft and its approvals are voided")
    def patch(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        check_if_match(request, notice)
        data = self.NoticeEditInput(data=request.data)
        data.is_valid(raise_exception=True)
        notice = services.notice_edit(actor=request.user, notice=notice, **data.validated_data)
        return with_etag(Response(NoticeOutputSerializer(notice).data), notice)


class NoticeSubmitApi(ApiView):
    honours_if_match = True
    @extend_schema(request=None, parameters=[IF_MATCH],
                   responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409, 412, 422)},
                   summary="Submit a draft notice for approval")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        check_if_match(request, notice)
        notice = services.notice_submit(actor=request.user, notice=notice)
        return with_etag(Response(NoticeOutputSerializer(notice).data), notice)


class NoticeApproveApi(ApiView):
    honours_if_match = True
    class NoticeApproveInput(serializers.Serializer):
        content_hash = StrictCharField(max_length=64, help_text="The content_hash of the text you reviewed; "
                                                                      "if the notice changed since, 409 stale.")
        note = StrictCharField(required=False, allow_blank=True, default="", max_length=5000)
        # Approving over the notice checker's flags needs a reason.
        override_reason = StrictCharField(required=False, allow_blank=True, default="", max_length=5000,
                                                help_text="Required when the notice checker flagged the text.")

    @extend_schema(request=NoticeApproveInput, parameters=[IF_MATCH],
                   responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary=("Approve the exact text of a notice (supervisors signed in, never an API key; not its "
                            "drafter or editor)"))
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        check_if_match(request, notice)
        data = self.NoticeApproveInput(data=request.data)
        data.is_valid(raise_exception=True)
        notice = services.notice_approve(actor=request.user, notice=notice, **data.validated_data)
        return with_etag(Response(NoticeOutputSerializer(notice).data), notice)


class NoticeRejectApi(ApiView):
    honours_if_match = True
    class NoticeRejectInput(serializers.Serializer):
        note = StrictCharField(max_length=5000, help_text="Why it is rejected (required).")

    @extend_schema(request=NoticeRejectInput, parameters=[IF_MATCH],
                   responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409, 412, 413, 415, 422)},
                   summary="Reject a notice pending approval (supervisors signed in, never an API key)")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        check_if_match(request, notice)
        data = self.NoticeRejectInput(data=request.data)
        data.is_valid(raise_exception=True)
        notice = services.notice_reject(actor=request.user, notice=notice, **data.validated_data)
        return with_etag(Response(NoticeOutputSerializer(notice).data), notice)


class NoticeWithdrawApi(ApiView):
    honours_if_match = True
    @extend_schema(request=None, parameters=[IF_MATCH],
                   responses={200: NoticeOutputSerializer, **refusals(400, 403, 404, 409, 412, 422)},
                   summary="Withdraw a notice that has not been sent")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        check_if_match(request, notice)
        notice = services.notice_withdraw(actor=request.user, notice=notice)
        return with_etag(Response(NoticeOutputSerializer(notice).data), notice)


class NoticeDispatchApi(ApiView):
    honours_if_match = True
    @extend_schema(request=None, parameters=[IF_MATCH],
                   responses={202: NoticeOutputSerializer, **refusals(400, 403, 404, 409, 412, 422)},
                   summary="Send a notice a person approved (queued; sent exactly once by the worker)")
    def post(self, request, pk: int):
        notice = selectors.notice_get_for_user(user=request.user, pk=pk)
        check_if_match(request, notice)
        notice = services.notice_dispatch_request(actor=request.user, notice=notice)
        response = Response(NoticeOutputSerializer(notice).data, status=status.HTTP_202_ACCEPTED,
                            headers={"Location": f"/api/v1/notices/{notice.pk}/"})
        return with_etag(response, notice)


# --- audit ------------------------------------------------------------------------------------

class AuditEventListApi(ListApi):
    queryset = AuditEvent.objects.none()
    filterset_class = AuditEventFilter
    output_serializer_class = AuditEventOutputSerializer
    ordering_fields = ("-id", "id")

    def select(self, request, **params):
        case_id = _case(request, params["case"]).pk if params.get("case") else None
        return audit_events_for_tenant(tenant_id=request.user.tenant_id, case_id=case_id,
                                       run_id=params.get("run_id"), action=params.get("action"))

    @extend_schema(responses={200: AuditEventOutputSerializer(many=True), **refusals(400, 403, 404)},
                   summary="Audit events of the tenant (auditors, supervisors, admins)")
    def get(self, request):
        if not request.user.can_see_audit:
            raise Forbidden(AUDIT_FORBIDDEN)
        return self.list_response(request)



@csrf_exempt  # a POST with no CSRF token must still get this JSON 404, not Django's CSRF page
def api_not_found(request, *args, **kwargs):
    """Unknown addresses under /api/ answer in the API's error format, not with an HTML page."""
    return JsonResponse({"code": "not_found", "detail": f"No API endpoint at {request.path}; "
                                                        f"the endpoints are listed at /api/docs/."}, status=404)
