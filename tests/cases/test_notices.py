"""Notices: drafted by agents or people, approved by another supervisor bound to the exact
content, sent exactly once."""

import pytest
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend

from accounts.models import Role
from audit.models import AuditEvent
from cases import policy, services
from cases.models import Approval, Notice, NoticeDispatch
from core.errors import Conflict, Forbidden, Invalid, NotAllowed, NotFound, Stale
from tests.factories import UserFactory
from tests.helpers import CountDelta, assert_nothing_changed, bring_case_to


class UnreachableSmtpBackend(BaseEmailBackend):
    """An email backend whose server is down."""

    def send_messages(self, email_messages):
        raise ConnectionRefusedError("[Errno 111] Connection refused by smtp.example")


FAILING_BACKEND = f"{__name__}.UnreachableSmtpBackend"


def draft(actor, case, body="We received your complaint and are reviewing it.", **kwargs):
    return services.notice_draft(actor=actor, case=case, subject="Your complaint", body=body, **kwargs)


@pytest.fixture
def pending_notice(case, agent):
    notice = draft(agent, case, run_id="run-3")
    services.notice_submit(actor=agent, notice=notice)
    return notice


@pytest.fixture
def approved_notice(pending_notice, supervisor):
    services.notice_approve(actor=supervisor, notice=pending_notice, content_hash=pending_notice.content_hash)
    return pending_notice


# --- drafting ----------------------------------------------------------------------------------

def test_agent_drafts_a_notice_and_nothing_is_sent(case, agent):
    version = case.version
    with CountDelta() as delta:
        notice = draft(agent, case, run_id="run-3")
    assert (notice.status, notice.drafted_by, notice.last_edited_by) == ("draft", "agent:risk_assessor@1.0",
                                                                         "agent:risk_assessor@1.0")
    assert notice.recipient == case.complainant_email
    assert notice.content_hash == notice.compute_content_hash()
    assert (delta.notices, delta.case_events, delta.audit_events, delta.emails) == (1, 1, 1, 0)
    case.refresh_from_db()
    assert case.version == version  # notices do not change the case row
    audit = AuditEvent.objects.get(action="cases.notice.drafted")
    assert (audit.target_type, audit.target_id, audit.run_id) == ("notice", str(notice.pk), "run-3")


def test_analyst_drafts_to_an_explicit_recipient(case, analyst):
    notice = draft(analyst, case, recipient="lawyer@example.net")
    assert (notice.recipient, notice.drafted_by) == ("lawyer@example.net", f"user:{analyst.pk}")


@pytest.mark.parametrize("role", [Role.AUDITOR, Role.ADMIN])
def test_roles_without_draft_right_are_refused(role, case, tenant):
    user = UserFactory(username=f"{role}-n", tenant=tenant, role=role)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="cannot draft notices"):
        draft(user, case)


def test_outsider_cannot_draft(case, outsider):
    with assert_nothing_changed(case), pytest.raises(NotFound):
        draft(outsider, case)


def test_invalid_notice_content(case, analyst):
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.notice_draft(actor=analyst, case=case, subject=" ", body="", recipient="not-an-address")
    assert set(refused.value.fields) == {"recipient", "subject", "body"}
    assert refused.value.fields["recipient"] == ["'not-an-address' is not a valid email address."]


def test_no_notice_on_a_closed_case(case, analyst, supervisor):
    bring_case_to(case, "closed", supervisor=supervisor, analyst=analyst)
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="is closed"):
        draft(analyst, case)


def test_draft_idempotency_key(case, agent):
    first = draft(agent, case, idempotency_key="run-3:step-1:draft")
    with CountDelta() as delta:
        second = draft(agent, case, idempotency_key="run-3:step-1:draft")
    assert second.pk == first.pk
    assert (delta.notices, delta.case_events, delta.audit_events) == (0, 0, 0)


# --- submitting, approving, rejecting -----------------------------------------------------------

def test_submit_moves_a_draft_to_pending_approval(case, agent):
    notice = draft(agent, case)
    services.notice_submit(actor=agent, notice=notice)
    assert (notice.status, notice.submitted_by) == ("pending_approval", "agent:risk_assessor@1.0")
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="Only a draft can be submitted"):
        services.notice_submit(actor=agent, notice=notice)


def test_approval_is_bound_to_the_content_hash(pending_notice, supervisor, case):
    with CountDelta() as delta:
        services.notice_approve(actor=supervisor, notice=pending_notice, content_hash=pending_notice.content_hash,
                                note="Fine.")
    assert pending_notice.status == "approved"
    approval = Approval.objects.get(notice=pending_notice)
    assert (approval.content_hash, approval.approver, approval.decision, approval.policy_version) == (
        pending_notice.content_hash, supervisor, "approved", policy.POLICY_VERSION)
    assert approval.case_version == case.version
    assert (delta.approvals, delta.case_events, delta.audit_events, delta.emails) == (1, 1, 1, 0)


def test_approving_a_different_hash_is_stale(pending_notice, supervisor, case):
    with assert_nothing_changed(case), pytest.raises(Stale) as refused:
        services.notice_approve(actor=supervisor, notice=pending_notice, content_hash="0" * 64)
    assert refused.value.message == ("The notice changed since you opened it; review the current text and "
                                     "approve again.")
    pending_notice.refresh_from_db()
    assert pending_notice.status == "pending_approval"


def test_approver_who_saw_the_old_text_is_stale_after_an_edit(case, analyst, supervisor):
    notice = draft(analyst, case)
    services.notice_submit(actor=analyst, notice=notice)
    seen_hash = notice.content_hash
    services.notice_edit(actor=analyst, notice=notice, body="A different promise.")
    services.notice_submit(actor=analyst, notice=notice)
    with assert_nothing_changed(case), pytest.raises(Stale):
        services.notice_approve(actor=supervisor, notice=notice, content_hash=seen_hash)


def test_drafter_cannot_approve_or_reject(case, supervisor):
    notice = draft(supervisor, case)
    services.notice_submit(actor=supervisor, notice=notice)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="four eyes"):
        services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="four eyes"):
        services.notice_reject(actor=supervisor, notice=notice, note="Hmm.")


def test_last_editor_cannot_approve(case, analyst, supervisor, supervisor_b):
    notice = draft(analyst, case)
    services.notice_edit(actor=supervisor_b, notice=notice, body="Supervisor B's wording.")
    services.notice_submit(actor=analyst, notice=notice)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="You drafted or edited this notice"):
        services.notice_approve(actor=supervisor_b, notice=notice, content_hash=notice.content_hash)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    assert notice.status == "approved"


@pytest.mark.parametrize("who", ["agent", "auditor", "analyst", "admin_user"])
def test_only_supervisors_approve_notices(who, request, pending_notice, case):
    actor = request.getfixturevalue(who)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="approve notices"):
        services.notice_approve(actor=actor, notice=pending_notice, content_hash=pending_notice.content_hash)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="reject notices"):
        services.notice_reject(actor=actor, notice=pending_notice, note="No.")


def test_outsider_cannot_touch_a_notice(pending_notice, outsider, case):
    calls = [
        lambda: services.notice_approve(actor=outsider, notice=pending_notice,
                                        content_hash=pending_notice.content_hash),
        lambda: services.notice_reject(actor=outsider, notice=pending_notice, note="No."),
        lambda: services.notice_edit(actor=outsider, notice=pending_notice, body="Mine now."),
        lambda: services.notice_submit(actor=outsider, notice=pending_notice),
        lambda: services.notice_withdraw(actor=outsider, notice=pending_notice),
        lambda: services.notice_dispatch(actor=outsider, notice=pending_notice),
    ]
    for call in calls:
        with assert_nothing_changed(case), pytest.raises(NotFound):
            call()


def test_approve_only_when_pending(case, analyst, supervisor):
    notice = draft(analyst, case)
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="Only a notice pending approval"):
        services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)


def test_reject_needs_a_note(pending_notice, supervisor, case):
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.notice_reject(actor=supervisor, notice=pending_notice, note="  ")
    assert refused.value.fields == {"note": ["A reason is required."]}


def test_rejected_notice_can_be_reworked(pending_notice, supervisor, analyst, case):
    services.notice_reject(actor=supervisor, notice=pending_notice, note="Promise no dates.")
    assert pending_notice.status == "rejected"
    rejection = Approval.objects.get(notice=pending_notice)
    assert (rejection.decision, rejection.note, rejection.is_valid) == ("rejected", "Promise no dates.", False)
    with assert_nothing_changed(case), pytest.raises(NotAllowed):
        services.notice_dispatch(actor=analyst, notice=pending_notice)
    services.notice_edit(actor=analyst, notice=pending_notice, body="We are reviewing your complaint.")
    assert pending_notice.status == "draft"


# --- editing after approval ------------------------------------------------------------------

def test_edit_after_approval_voids_it_and_dispatch_needs_a_new_one(approved_notice, analyst, supervisor,
                                                                   supervisor_b, case):
    old_approval = Approval.objects.get(notice=approved_notice)
    version = approved_notice.version
    services.notice_edit(actor=analyst, notice=approved_notice, body="We will refund you within 5 days.")
    assert (approved_notice.status, approved_notice.version) == ("draft", version + 1)
    old_approval.refresh_from_db()
    assert old_approval.voided_at is not None
    assert old_approval.void_reason == "content edited"
    event = case.events.order_by("-sequence").first()
    assert (event.event_type, event.payload["approvals_voided"], event.payload["previous_status"]) == (
        "notice.edited", 1, "approved")

    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="Only an approved notice can be sent"):
        services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert mail.outbox == []

    services.notice_submit(actor=analyst, notice=approved_notice)
    services.notice_approve(actor=supervisor_b, notice=approved_notice, content_hash=approved_notice.content_hash)
    services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert len(mail.outbox) == 1
    assert mail.outbox[0].body == "We will refund you within 5 days."
    dispatch = NoticeDispatch.objects.get(notice=approved_notice)
    assert dispatch.approval.approver == supervisor_b


def test_edit_without_a_change_keeps_the_approval(approved_notice, analyst, case):
    with assert_nothing_changed(case):
        services.notice_edit(actor=analyst, notice=approved_notice, body=approved_notice.body)
    approved_notice.refresh_from_db()
    assert approved_notice.status == "approved"


def test_sent_notice_cannot_be_edited(approved_notice, analyst, case):
    services.notice_dispatch(actor=analyst, notice=approved_notice)
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="cannot be edited"):
        services.notice_edit(actor=analyst, notice=approved_notice, body="Too late.")


def test_body_tampered_after_approval_is_not_sent(approved_notice, analyst, case):
    Notice.objects.filter(pk=approved_notice.pk).update(body="Send us your bank password.")
    approved_notice.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="does not match its recorded hash"):
        services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert mail.outbox == []


def test_body_and_hash_tampered_after_approval_is_not_sent(approved_notice, analyst, case):
    body = "Send us your bank password."
    Notice.objects.filter(pk=approved_notice.pk).update(
        body=body, content_hash=Notice(recipient=approved_notice.recipient, subject=approved_notice.subject,
                                       body=body).compute_content_hash())
    approved_notice.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="no valid approval of its current"):
        services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert mail.outbox == []


def test_withdrawn_notice_is_not_sent(approved_notice, analyst, case):
    services.notice_withdraw(actor=analyst, notice=approved_notice)
    assert approved_notice.status == "withdrawn"
    assert Approval.objects.get(notice=approved_notice).void_reason == "withdrawn"
    with assert_nothing_changed(case), pytest.raises(NotAllowed):
        services.notice_dispatch(actor=analyst, notice=approved_notice)


# --- dispatch ------------------------------------------------------------------------------------

def test_dispatch_sends_exactly_one_email_with_the_recorded_message_id(approved_notice, analyst, case):
    with CountDelta() as delta:
        services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert approved_notice.status == "sent"
    assert approved_notice.sent_at is not None
    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    dispatch = NoticeDispatch.objects.get(notice=approved_notice)
    assert email.message()["Message-ID"] == dispatch.message_id == approved_notice.external_message_id
    assert approved_notice.external_message_id.endswith("@arbiter.example>")
    assert (email.to, email.subject, email.body) == ([case.complainant_email], "Your complaint",
                                                     approved_notice.body)
    assert email.extra_headers["X-Arbiter-Case"] == case.reference
    assert (dispatch.status, dispatch.attempts, dispatch.last_error, dispatch.dispatched_by) == (
        "sent", 1, "", f"user:{analyst.pk}")
    assert dispatch.approval == Approval.objects.get(notice=approved_notice)
    actions = list(AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("-sequence")
                   .values_list("action", flat=True)[:2])
    assert actions == ["cases.notice.sent", "cases.notice.dispatch_started"]
    assert (delta.dispatches, delta.case_events, delta.audit_events, delta.emails) == (1, 2, 2, 1)


def test_second_dispatch_is_a_conflict_and_sends_nothing(approved_notice, analyst, supervisor, case):
    services.notice_dispatch(actor=analyst, notice=approved_notice)
    for actor in (analyst, supervisor):
        with assert_nothing_changed(case), pytest.raises(Conflict) as refused:
            services.notice_dispatch(actor=actor, notice=approved_notice)
        assert refused.value.message == "This notice is already sent; it is sent only once."
    assert len(mail.outbox) == 1


def test_agent_cannot_dispatch(approved_notice, agent, case):
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="Agents cannot send notices"):
        services.notice_dispatch(actor=agent, notice=approved_notice)


@pytest.mark.parametrize("who", ["auditor", "admin_user"])
def test_roles_without_dispatch_right(who, request, approved_notice, case):
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="cannot send notices"):
        services.notice_dispatch(actor=request.getfixturevalue(who), notice=approved_notice)


def test_pending_notice_cannot_be_dispatched(pending_notice, analyst, case):
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="this one is pending approval"):
        services.notice_dispatch(actor=analyst, notice=pending_notice)


def test_failing_backend_marks_the_notice_failed_and_a_retry_sends_once(approved_notice, analyst, case,
                                                                        settings):
    settings.EMAIL_BACKEND = FAILING_BACKEND
    services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert approved_notice.status == "failed"
    assert approved_notice.external_message_id == ""
    dispatch = NoticeDispatch.objects.get(notice=approved_notice)
    assert (dispatch.status, dispatch.attempts) == ("failed", 1)
    assert dispatch.last_error == "ConnectionRefusedError: [Errno 111] Connection refused by smtp.example"
    failed = AuditEvent.objects.get(action="cases.notice.dispatch_failed")
    assert (failed.decision, failed.payload["error"]) == ("failed", dispatch.last_error)
    assert mail.outbox == []
    first_message_id = dispatch.message_id

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert approved_notice.status == "sent"
    assert len(mail.outbox) == 1
    dispatch.refresh_from_db()
    assert (dispatch.status, dispatch.attempts, dispatch.last_error) == ("sent", 2, "")
    # The retry reuses the one dispatch row and its Message-ID: a receiver can deduplicate.
    assert dispatch.message_id == first_message_id == approved_notice.external_message_id
    assert mail.outbox[0].message()["Message-ID"] == first_message_id
    assert NoticeDispatch.objects.filter(notice=approved_notice).count() == 1

    with assert_nothing_changed(case), pytest.raises(Conflict):
        services.notice_dispatch(actor=analyst, notice=approved_notice)
    assert len(mail.outbox) == 1


def test_notice_status_is_protected(pending_notice):
    with pytest.raises(AttributeError):
        pending_notice.status = "sent"


# --- notice_dispatch_request: the browser's and the API's "send" ------------------------------

def test_dispatch_request_audits_and_queues_one_task_after_commit(approved_notice, analyst,
                                                                  django_capture_on_commit_callbacks):
    from unittest import mock

    with mock.patch("cases.tasks.notice_dispatch_task.delay") as delay:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            services.notice_dispatch_request(actor=analyst, notice=approved_notice)
    assert len(callbacks) == 1
    delay.assert_called_once_with(approved_notice.pk, analyst.pk)
    assert AuditEvent.objects.filter(action="cases.notice.dispatch_requested",
                                     target_id=str(approved_notice.pk)).count() == 1
    approved_notice.refresh_from_db()
    assert approved_notice.status == "approved"  # the worker sends; the request only asks
    assert mail.outbox == []


@pytest.mark.parametrize("who", ["agent", "auditor", "outsider"])
def test_dispatch_request_refused_queues_nothing(approved_notice, who, request,
                                                 django_capture_on_commit_callbacks):
    with assert_nothing_changed(approved_notice.case), pytest.raises((Forbidden, NotFound)):
        with django_capture_on_commit_callbacks() as callbacks:
            services.notice_dispatch_request(actor=request.getfixturevalue(who), notice=approved_notice)
    assert callbacks == []


def test_dispatch_request_for_an_unapproved_notice_queues_nothing(pending_notice, analyst,
                                                                  django_capture_on_commit_callbacks):
    with assert_nothing_changed(pending_notice.case), pytest.raises(NotAllowed, match="approved"):
        with django_capture_on_commit_callbacks() as callbacks:
            services.notice_dispatch_request(actor=analyst, notice=pending_notice)
    assert callbacks == []
