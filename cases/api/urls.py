"""/api/v1/ routes for cases, evidence, proposals, notices, case events and audit events.
Ids use the `id` converter (core.api): at most 18 digits, so no id overflows the database."""

from django.urls import path

import core.api  # noqa: F401  (registers the `id` path converter)
from cases.api import views

app_name = "cases_api"

urlpatterns = [
    path("cases/", views.CaseListCreateApi.as_view(), name="case_list"),
    path("cases/<str:reference>/", views.CaseDetailApi.as_view(), name="case_detail"),
    path("cases/<str:reference>/transitions/", views.CaseTransitionApi.as_view(), name="case_transition"),
    path("cases/<str:reference>/events/", views.CaseEventListApi.as_view(), name="case_events"),
    path("cases/<str:reference>/evidence/", views.EvidenceListCreateApi.as_view(), name="evidence_list"),
    path("cases/<str:reference>/evidence/upload/", views.EvidenceUploadApi.as_view(), name="evidence_upload"),
    path("cases/<str:reference>/proposals/", views.ProposalCreateApi.as_view(), name="proposal_create"),
    path("cases/<str:reference>/notices/", views.NoticeDraftApi.as_view(), name="notice_draft"),
    path("evidence/<id:pk>/download/", views.EvidenceDownloadApi.as_view(), name="evidence_download"),
    path("proposals/", views.ProposalListApi.as_view(), name="proposal_list"),
    path("proposals/<id:pk>/", views.ProposalDetailApi.as_view(), name="proposal_detail"),
    path("proposals/<id:pk>/approve/", views.ProposalApproveApi.as_view(), name="proposal_approve"),
    path("proposals/<id:pk>/reject/", views.ProposalRejectApi.as_view(), name="proposal_reject"),
    path("proposals/<id:pk>/withdraw/", views.ProposalWithdrawApi.as_view(), name="proposal_withdraw"),
    path("notices/", views.NoticeListApi.as_view(), name="notice_list"),
    path("notices/<id:pk>/", views.NoticeDetailApi.as_view(), name="notice_detail"),
    path("notices/<id:pk>/submit/", views.NoticeSubmitApi.as_view(), name="notice_submit"),
    path("notices/<id:pk>/approve/", views.NoticeApproveApi.as_view(), name="notice_approve"),
    path("notices/<id:pk>/reject/", views.NoticeRejectApi.as_view(), name="notice_reject"),
    path("notices/<id:pk>/withdraw/", views.NoticeWithdrawApi.as_view(), name="notice_withdraw"),
    path("notices/<id:pk>/dispatch/", views.NoticeDispatchApi.as_view(), name="notice_dispatch"),
    path("audit-events/", views.AuditEventListApi.as_view(), name="audit_event_list"),
]
