"""Email exactly once, or an honest "unknown" — against a real SMTP conversation (a local socket
server, tests/fakes/smtp_server.py): a server that takes the message and drops the connection
before its final reply yields ONE email and a notice `unknown`, never retried; an operator
settles it (command or admin action), audited with the reason; a refused recipient is `failed`
(retryable). Runs on SQLite and PostgreSQL (no broker needed)."""

from __future__ import annotations

import pytest
from celery.exceptions import Retry
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from audit.models import AuditEvent
from cases import services
from cases.models import DispatchStatus, NoticeDispatch, NoticeStatus
from cases.tasks import notice_dispatch_task
from core.errors import Conflict, Forbidden, Invalid, NotAllowed
from tests.fakes.smtp_server import FakeSmtpServer
from tests.helpers import assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db


@pytest.fixture
def smtp(settings):
    with FakeSmtpServer() as server:
        settings.EMAIL_BACKEND = "cases.email_delivery.SmtpEmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", server.port, 5
        yield server


@pytest.fixture
def decided_case(case, analyst, supervisor):
    return bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)


@pytest.fixture
def approved(decided_case, analyst, supervisor):
    notice = services.notice_draft(actor=analyst, case=decided_case, subject="Our decision", body="We upheld it.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    return notice


def test_a_dropped_final_reply_is_one_email_and_an_unknown_notice_never_retried(smtp, approved, analyst,
                                                                                monkeypatch):
    smtp.mode = "drop_after_data"
    retries = []
    monkeypatch.setattr(notice_dispatch_task, "retry", lambda *a, **kw: retries.append(kw))
    assert notice_dispatch_task.apply(args=[approved.pk]).get() == NoticeStatus.UNKNOWN
    approved.refresh_from_db()
    dispatch = NoticeDispatch.objects.get(notice=approved)
    assert approved.status == NoticeStatus.UNKNOWN and dispatch.status == DispatchStatus.UNKNOWN
    assert "final reply never came" in dispatch.last_error
    assert len(smtp.messages) == 1 and dispatch.message_id.encode() in smtp.messages[0]
    assert retries == []  # never retried automatically
    assert AuditEvent.objects.filter(action="cases.notice.dispatch_unknown", target_id=str(approved.pk)).count() == 1

    # A redelivered task message, a second click, an admin "send now": all refused; nothing is sent again.
    assert notice_dispatch_task.apply(args=[approved.pk]).get() == "already-sent"
    with assert_nothing_changed(approved.case), pytest.raises(Conflict, match="unknown"):
        services.notice_dispatch_request(actor=analyst, notice=approved)
    assert len(smtp.messages) == 1


def test_an_unsettled_notice_holds_the_case_open_and_says_how_to_settle_it(smtp, approved, supervisor):
    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=approved)
    case = approved.case
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        services.case_transition(actor=supervisor, case=case, transition="close")
    assert f"N{approved.pk} is unknown" in refused.value.message
    assert f"notice_settle {approved.pk}" in refused.value.message


def test_the_operator_settles_it_as_sent_with_the_message_id_from_the_mail_log(smtp, approved, supervisor):
    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=approved)
    message_id = NoticeDispatch.objects.get(notice=approved).message_id
    call_command("notice_settle", str(approved.pk), "--sent", "--message-id", message_id,
                 "--reason", "Found in the relay's log: 250 queued as 4F2A.", "--user", "supervisor")
    approved.refresh_from_db()
    assert approved.status == NoticeStatus.SENT and approved.external_message_id == message_id
    event = AuditEvent.objects.get(action="cases.notice.settled", target_id=str(approved.pk))
    assert event.actor_id == f"user:{supervisor.pk}" and event.decision == "sent"
    assert event.payload["reason"].startswith("Found in the relay's log") and event.payload["message_id_matches"]
    assert event.payload["previous_status"] == "unknown"
    case = approved.case
    case.refresh_from_db()
    services.case_transition(actor=supervisor, case=case, transition="close")  # no longer held up
    assert len(smtp.messages) == 1


def test_settled_as_failed_it_can_be_sent_again(smtp, approved, supervisor):
    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=approved)
    services.notice_settle(actor=supervisor, notice=approved, outcome="failed",
                           reason="Not in the mail log: the relay never queued it.")
    assert approved.status == NoticeStatus.FAILED
    smtp.mode = "accept"
    services.notice_dispatch(actor=supervisor, notice=approved)
    assert approved.status == NoticeStatus.SENT and len(smtp.messages) == 2


def test_settling_is_refused_without_a_reason_a_message_id_or_the_right_role(smtp, approved, supervisor, analyst):
    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=approved)
    case = approved.case
    refusals = [
        (Forbidden, lambda: services.notice_settle(actor=analyst, notice=approved, outcome="failed", reason="x")),
        (Invalid, lambda: services.notice_settle(actor=supervisor, notice=approved, outcome="failed", reason=" ")),
        (Invalid, lambda: services.notice_settle(actor=supervisor, notice=approved, outcome="sent", reason="log")),
        (Invalid, lambda: services.notice_settle(actor=supervisor, notice=approved, outcome="maybe", reason="?")),
    ]
    for error, call in refusals:
        with assert_nothing_changed(case), pytest.raises(error):
            call()
    with assert_nothing_changed(case), pytest.raises(CommandError, match="Message-ID"):
        call_command("notice_settle", str(approved.pk), "--sent", "--reason", "seen", "--user", "supervisor")


def test_a_send_still_in_progress_or_already_recorded_cannot_be_settled(smtp, approved, supervisor, settings):
    from cases.models import Notice

    # Claimed (sending) a moment ago, as notice_dispatch's first transaction leaves it: maybe in progress.
    Notice.objects.filter(pk=approved.pk).update(status=NoticeStatus.SENDING)
    NoticeDispatch.objects.create(tenant_id=approved.tenant_id, notice=approved, content_hash=approved.content_hash,
                                  message_id="<m-1@arbiter.example>", approval=approved.approvals.first(),
                                  dispatched_by="system:test", attempts=1)
    approved.refresh_from_db()
    with assert_nothing_changed(approved.case), pytest.raises(NotAllowed, match="may still be in progress"):
        services.notice_settle(actor=supervisor, notice=approved, outcome="failed", reason="worker died")
    settings.ARBITER_NOTICE_SENDING_STUCK_SECONDS = 0
    services.notice_settle(actor=supervisor, notice=approved, outcome="failed", reason="worker died")
    assert approved.status == NoticeStatus.FAILED
    smtp.mode = "accept"
    services.notice_dispatch(actor=supervisor, notice=approved)
    with assert_nothing_changed(approved.case), pytest.raises(NotAllowed, match="is sent"):
        services.notice_settle(actor=supervisor, notice=approved, outcome="sent", reason="x", message_id="<x>")


def test_the_admin_action_settles_an_unknown_notice(smtp, approved, supervisor, client):
    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=approved)
    supervisor.is_staff = True
    supervisor.save()
    client.force_login(supervisor)
    response = client.post(reverse("admin:cases_notice_changelist"),
                           {"action": "settle_notices_sent", "_selected_action": [approved.pk],
                            "reason": "Message-ID found in the MTA log"}, follow=True)
    assert response.status_code == 200 and "Settled as sent" in response.content.decode()
    approved.refresh_from_db()
    assert approved.status == NoticeStatus.SENT


def test_a_refused_recipient_is_failed_and_retryable(smtp, approved, supervisor):
    smtp.mode = "reject_recipient"
    services.notice_dispatch(actor=supervisor, notice=approved)
    assert approved.status == NoticeStatus.FAILED and smtp.messages == []


def test_a_backend_that_cannot_tell_the_phase_is_treated_as_unknown_on_a_dropped_reply(smtp, approved, supervisor,
                                                                                      settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=approved)
    assert approved.status == NoticeStatus.UNKNOWN and len(smtp.messages) == 1


def test_an_anymail_delivery_event_settles_an_unknown_notice(smtp, approved, supervisor, settings):
    from anymail.signals import AnymailTrackingEvent, tracking

    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=approved)
    message_id = NoticeDispatch.objects.get(notice=approved).message_id
    # An event for another message changes nothing.
    wrong = AnymailTrackingEvent(event_type="delivered", message_id="esp-1",
                                 metadata={"arbiter_notice_id": str(approved.pk), "arbiter_message_id": "<other>"})
    with assert_nothing_changed(approved.case):
        tracking.send(sender=object, event=wrong, esp_name="Test")
    event = AnymailTrackingEvent(event_type="delivered", message_id="esp-1", mta_response="250 2.0.0 OK",
                                 metadata={"arbiter_notice_id": str(approved.pk), "arbiter_message_id": message_id})
    responses = tracking.send(sender=object, event=event, esp_name="Test")
    assert ("settled:sent" in [r for _receiver, r in responses])
    approved.refresh_from_db()
    assert approved.status == NoticeStatus.SENT
    audit = AuditEvent.objects.get(action="cases.notice.settled", target_id=str(approved.pk))
    assert audit.actor_id == "system:anymail-test" and "delivered" in audit.payload["reason"]


def test_anymail_sends_the_notice_with_its_metadata(approved, supervisor, settings, mailoutbox):
    settings.EMAIL_BACKEND = "anymail.backends.test.EmailBackend"
    services.notice_dispatch(actor=supervisor, notice=approved)
    assert approved.status == NoticeStatus.SENT
    params = mailoutbox[0].anymail_test_params
    assert params["metadata"] == {"arbiter_notice_id": str(approved.pk),
                                  "arbiter_message_id": NoticeDispatch.objects.get(notice=approved).message_id}


def test_the_dispatch_task_is_retried_when_the_database_is_unreachable(approved, monkeypatch):
    from django.db import OperationalError

    def database_down(**kwargs):
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr("cases.services.notice_dispatch", database_down)
    # Not dropped: Celery publishes the message again with a backoff (eagerly, the Retry is raised).
    with pytest.raises(Retry, match="Retry in 1s: OperationalError"):
        notice_dispatch_task.apply(args=[approved.pk])


def test_recording_the_outcome_survives_a_short_database_outage(smtp, approved, supervisor, monkeypatch):
    from django.db import OperationalError

    from cases.services import dispatch

    real, failures = dispatch._record_outcome_once, []

    def flaky(**kwargs):
        if len(failures) < 2:
            failures.append(1)
            raise OperationalError("server closed the connection unexpectedly")
        return real(**kwargs)

    monkeypatch.setattr(dispatch, "_record_outcome_once", flaky)
    monkeypatch.setattr(dispatch, "RECORD_RETRY_DELAYS", (0, 0, 0))
    services.notice_dispatch(actor=supervisor, notice=approved)
    assert approved.status == NoticeStatus.SENT and len(failures) == 2 and len(smtp.messages) == 1


def test_deciding_is_refused_with_the_unsettled_notice_named(smtp, case, analyst, supervisor):
    case = bring_case_to(case, "ready_for_decision", supervisor=supervisor, analyst=analyst)
    notice = services.notice_draft(actor=analyst, case=case, subject="Update", body="We are reviewing it.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    smtp.mode = "drop_after_data"
    services.notice_dispatch(actor=supervisor, notice=notice)
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        services.case_transition(actor=supervisor, case=case, transition="decide", reason="Upheld.")
    assert "no notice may be unsettled" in refused.value.message and f"N{notice.pk} is unknown" in refused.value.message
