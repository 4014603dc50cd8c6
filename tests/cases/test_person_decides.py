"""Only people decide, whichever door is used: the rule sits in the services, keyed on the actor,
so an API key's service account is refused every decision (PersonRequired, 403 person_required)
whether it comes through the API, a management command or a direct call — and a notice approved
by anything but a person is never sent, by whoever asks for it."""

import pytest
from django.core import mail
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.services import api_key_create
from cases import policy, services
from cases.models import Approval, ApprovalDecision, Notice, NoticeDispatch, NoticeStatus
from cases.tasks import notice_dispatch_task
from core.actors import Actor
from core.errors import Forbidden, PersonRequired
from tests.helpers import assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db


@pytest.fixture
def key_supervisor(tenant):
    """The service account behind a supervisor API key, as the API authenticates it."""
    api_key, _ = api_key_create(tenant=tenant, name="Back office", role="supervisor")
    return api_key.user


def _pending_notice(analyst, case) -> Notice:
    notice = services.notice_draft(actor=analyst, case=case, subject="Your complaint", body="We are on it.")
    return services.notice_submit(actor=analyst, notice=notice)


def test_person_required_is_a_403_forbidden():
    assert issubclass(PersonRequired, Forbidden)
    assert (PersonRequired.code, PersonRequired.http_status) == ("person_required", 403)


@pytest.mark.parametrize("decision", ["proposal_approve", "proposal_reject", "notice_approve", "notice_reject"])
def test_a_service_account_cannot_decide_a_proposal_or_notice(decision, key_supervisor, analyst, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level",
                                        payload={"risk_level": "high"}, rationale="r")
    notice = _pending_notice(analyst, case)
    call = {
        "proposal_approve": lambda: services.proposal_approve(actor=key_supervisor, proposal=proposal),
        "proposal_reject": lambda: services.proposal_reject(actor=key_supervisor, proposal=proposal, note="No."),
        "notice_approve": lambda: services.notice_approve(actor=key_supervisor, notice=notice,
                                                          content_hash=notice.content_hash),
        "notice_reject": lambda: services.notice_reject(actor=key_supervisor, notice=notice, note="No."),
    }[decision]
    with assert_nothing_changed(case), pytest.raises(PersonRequired, match="Only a person signed in may"):
        call()


@pytest.mark.parametrize(("transition", "status"), [("decide", "ready_for_decision"), ("close", "decided"),
                                                    ("reopen", "closed")])
def test_a_service_account_cannot_decide_close_or_reopen(transition, status, key_supervisor, analyst, supervisor,
                                                         case):
    case = bring_case_to(case, status, supervisor=supervisor, analyst=analyst)
    with assert_nothing_changed(case), pytest.raises(PersonRequired, match=f"may {transition} a case"):
        services.case_transition(actor=key_supervisor, case=case, transition=transition, reason="Upheld.",
                                 confirm_reason="Told by phone.")
    assert policy.PERSON_ONLY_TRANSITIONS == {"decide", "close", "reopen"}


def test_a_person_supervisor_still_decides(supervisor, analyst, case):
    case = bring_case_to(case, "ready_for_decision", supervisor=supervisor, analyst=analyst)
    services.case_transition(actor=supervisor, case=case, transition="decide", reason="Upheld.",
                             confirm_reason="Told by phone.")
    assert case.status == "decided"


@pytest.fixture
def unknown_notice(analyst, supervisor, case):
    """A person-approved notice whose send ended `unknown` (the mail server may have it)."""
    notice = _pending_notice(analyst, case)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    Notice.objects.filter(pk=notice.pk).update(status=NoticeStatus.UNKNOWN)
    NoticeDispatch.objects.create(tenant_id=notice.tenant_id, notice=notice, content_hash=notice.content_hash,
                                  message_id="<m-1@arbiter.example>", approval=notice.approvals.first(),
                                  dispatched_by=f"user:{analyst.pk}", attempts=1, status="unknown")
    notice.refresh_from_db()
    return notice


@pytest.mark.parametrize("outcome", ["sent", "failed"])
def test_a_service_account_cannot_settle_an_unknown_notice(outcome, key_supervisor, unknown_notice):
    with assert_nothing_changed(unknown_notice.case), pytest.raises(PersonRequired, match="settle"):
        services.notice_settle(actor=key_supervisor, notice=unknown_notice, outcome=outcome,
                               reason="The mail log says so.", message_id="<m-1@arbiter.example>")
    unknown_notice.refresh_from_db()
    assert unknown_notice.status == NoticeStatus.UNKNOWN


def test_the_settle_command_refuses_a_service_account_too(key_supervisor, unknown_notice):
    with assert_nothing_changed(unknown_notice.case), pytest.raises(CommandError, match="Only a person signed in"):
        call_command("notice_settle", str(unknown_notice.pk), "--failed", "--reason", "Bounced.",
                     "--user", key_supervisor.username)


def test_a_person_still_settles_an_unknown_notice(supervisor, unknown_notice):
    services.notice_settle(actor=supervisor, notice=unknown_notice, outcome="failed", reason="Bounced.")
    assert unknown_notice.status == NoticeStatus.FAILED


@pytest.fixture
def key_approved(analyst, case, key_supervisor):
    """A notice whose only approval is a key's: written directly, since the services refuse it."""
    notice = _pending_notice(analyst, case)
    Approval.objects.create(tenant_id=case.tenant_id, notice=notice, approver=key_supervisor,
                            decision=ApprovalDecision.APPROVED, content_hash=notice.content_hash,
                            case_version=case.version, policy_version=policy.POLICY_VERSION)
    Notice.objects.filter(pk=notice.pk).update(status=NoticeStatus.APPROVED)
    notice.refresh_from_db()
    return notice


@pytest.mark.parametrize("who", ["analyst", "supervisor", "system"])
def test_a_key_approved_notice_is_never_sent(who, key_approved, request):
    actor = Actor.system("notice-dispatcher") if who == "system" else request.getfixturevalue(who)
    with assert_nothing_changed(key_approved.case), pytest.raises(PersonRequired, match="not by a person"):
        services.notice_dispatch(actor=actor, notice=key_approved)
    if who != "system":
        with assert_nothing_changed(key_approved.case), pytest.raises(PersonRequired):
            services.notice_dispatch_request(actor=actor, notice=key_approved)


def test_the_dispatch_task_refuses_a_key_approved_notice(key_approved, analyst):
    """A task queued before the rule (or by the lost-task redelivery) finds the key's approval void."""
    for actor_user_id in (analyst.pk, None):
        with assert_nothing_changed(key_approved.case):
            result = notice_dispatch_task.apply(args=[key_approved.pk, actor_user_id]).get()
        assert result == "refused:person_required"
    key_approved.refresh_from_db()
    assert key_approved.status == NoticeStatus.APPROVED and mail.outbox == []


def test_a_person_approval_of_the_same_text_makes_it_sendable(key_approved, supervisor, analyst):
    """The key's approval counts for nothing; a person's approval of the current text is what sends it."""
    Approval.objects.create(tenant_id=key_approved.tenant_id, notice=key_approved, approver=supervisor,
                            decision=ApprovalDecision.APPROVED, content_hash=key_approved.content_hash,
                            case_version=key_approved.case.version, policy_version=policy.POLICY_VERSION)
    services.notice_dispatch(actor=analyst, notice=key_approved)
    assert key_approved.status == NoticeStatus.SENT and len(mail.outbox) == 1
    assert NoticeDispatch.objects.get(notice=key_approved).approval.approver == supervisor
