"""/api/v1/ routes for cases, evidence, proposals, notices, case events and audit events."""

from django.urls import path

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
    path("proposals/", views.ProposalListApi.as_view(), name="proposal_list"),
    path("proposals/<int:pk>/", views.ProposalDetailApi.as_view(), name="proposal_detail"),
    path("proposals/<int:pk>/approve/", views.ProposalApproveApi.as_view(), name="proposal_approve"),
    path("proposals/<int:pk>/reject/", views.ProposalRejectApi.as_view(), name="proposal_reject"),
    path("proposals/<int:pk>/withdraw/", views.ProposalWithdrawApi.as_view(), name="proposal_withdraw"),
    path("notices/", views.NoticeListApi.as_view(), name="notice_list"),
    path("notices/<int:pk>/", views.NoticeDetailApi.as_view(), name="notice_detail"),
    path("notices/<int:pk>/submit/", views.NoticeSubmitApi.as_view(), name="notice_submit"),
    path("notices/<int:pk>/approve/", views.NoticeApproveApi.as_view(), name="notice_approve"),
    path("notices/<int:pk>/reject/", views.NoticeRejectApi.as_view(), name="notice_reject"),
    path("notices/<int:pk>/withdraw/", views.NoticeWithdrawApi.as_view(), name="notice_withdraw"),
    path("notices/<int:pk>/dispatch/", views.NoticeDispatchApi.as_view(), name="notice_dispatch"),
    path("audit-events/", views.AuditEventListApi.as_view(), name="audit_event_list"),
]
