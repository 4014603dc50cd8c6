"""Browser UI routes (namespace "web"). New areas (runs, threads) add their own modules and
routes here, and a link in templates/web/_nav.html. Every route's writes are retried after a
deadlock (web.retries), wrapped here once for all of them."""

from django.urls import path

from web.retries import writes_retried
from web.views import actions, audit, cases, live, memory, queue, review, review_decide, runs, threads

app_name = "web"

urlpatterns = writes_retried([
    path("", queue.case_list, name="case_list"),
    path("views/", queue.saved_view_save, name="saved_view_save"),
    path("views/<int:pk>/delete/", queue.saved_view_delete, name="saved_view_delete"),
    path("cases/new/", cases.case_create, name="case_create"),
    path("cases/<str:reference>/", cases.case_detail, name="case_detail"),
    path("cases/<str:reference>/take/", queue.case_take, name="case_take"),
    path("cases/<str:reference>/live/notices/", live.case_live_notices, name="case_live_notices"),
    path("notifications/", live.notifications, name="notifications"),
    path("notifications/all/", live.notification_list, name="notification_list"),
    path("notifications/read/", live.notifications_read, name="notifications_read"),
    path("cases/<str:reference>/audit/", audit.case_audit, name="case_audit"),
    path("cases/<str:reference>/transitions/", actions.case_transition, name="case_transition"),
    path("cases/<str:reference>/evidence/text/", actions.evidence_add_text, name="evidence_add_text"),
    path("cases/<str:reference>/evidence/upload/", actions.evidence_upload, name="evidence_upload"),
    path("cases/<str:reference>/evidence/<int:pk>/download/", cases.evidence_download, name="evidence_download"),
    path("cases/<str:reference>/proposals/", actions.proposal_create, name="proposal_create"),
    path("cases/<str:reference>/proposals/<int:pk>/approve/", actions.proposal_approve, name="proposal_approve"),
    path("cases/<str:reference>/proposals/<int:pk>/reject/", actions.proposal_reject, name="proposal_reject"),
    path("cases/<str:reference>/proposals/<int:pk>/withdraw/", actions.proposal_withdraw, name="proposal_withdraw"),
    # "Ask the agents again" on a stale proposal (ADR 0006)
    path("cases/<str:reference>/proposals/<int:pk>/reask/", actions.proposal_reask, name="proposal_reask"),
    path("cases/<str:reference>/deadlines/extend/", actions.case_deadline_extend, name="case_deadline_extend"),
    path("cases/<str:reference>/notices/", actions.notice_draft, name="notice_draft"),
    path("cases/<str:reference>/notices/<int:pk>/edit/", actions.notice_edit, name="notice_edit"),
    path("cases/<str:reference>/notices/<int:pk>/submit/", actions.notice_submit, name="notice_submit"),
    path("cases/<str:reference>/notices/<int:pk>/approve/", actions.notice_approve, name="notice_approve"),
    path("cases/<str:reference>/notices/<int:pk>/reject/", actions.notice_reject, name="notice_reject"),
    path("cases/<str:reference>/notices/<int:pk>/withdraw/", actions.notice_withdraw, name="notice_withdraw"),
    path("cases/<str:reference>/notices/<int:pk>/send/", actions.notice_send, name="notice_send"),
    path("cases/<str:reference>/runs/", runs.case_runs, name="case_runs"),
    path("cases/<str:reference>/analyse/", runs.case_analyse, name="case_analyse"),
    path("cases/<str:reference>/threads/", threads.case_threads, name="case_threads"),
    path("cases/<str:reference>/threads/new/", threads.case_thread_create, name="case_thread_create"),
    path("runs/", runs.run_list, name="run_list"),
    path("runs/<int:pk>/", runs.run_detail, name="run_detail"),
    path("runs/<int:pk>/steps/<int:sequence>/", runs.run_step_detail, name="run_step"),
    path("runs/<int:pk>/cancel/", runs.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/resume/", runs.run_resume, name="run_resume"),
    path("runs/<int:pk>/fork/", runs.run_fork, name="run_fork"),
    path("threads/", threads.thread_list, name="thread_list"),
    path("threads/<int:pk>/", threads.thread_detail, name="thread_detail"),
    path("threads/<int:pk>/pending/", threads.thread_pending, name="thread_pending"),
    path("threads/<int:pk>/messages/", threads.message_post, name="thread_message_post"),
    path("threads/<int:pk>/messages/<int:message_pk>/redact/", threads.message_redact, name="thread_message_redact"),
    path("threads/<int:pk>/compact/", threads.thread_compact, name="thread_compact"),
    path("memory/", memory.memory_list, name="memory_list"),
    path("memory/<int:pk>/confirm/", memory.memory_confirm, name="memory_confirm"),
    path("memory/<int:pk>/forget/", memory.memory_forget, name="memory_forget"),
    path("review/", review.review_inbox, name="review_inbox"),
    path("review/decide/", review_decide.review_decide, name="review_decide"),
    path("review/notices/<int:pk>/settle/", review_decide.review_settle, name="review_settle"),
    path("audit/", audit.audit_timeline, name="audit_timeline"),
    path("audit/export.<str:fmt>", audit.audit_export, name="audit_export"),
])
