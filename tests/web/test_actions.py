"""Actions on the case page: each calls its service, answers htmx with the page body and a plain
post with a redirect, and on refusal shows the error where it happened with its status while
nothing changes."""

from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from cases import services
from cases.models import NoticeStatus, ProposalStatus
from tests.helpers import CountDelta, assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "case-body"}


def url(name, case, *args):
    return reverse(f"web:{name}", args=[case.reference, *args])


@pytest.fixture
def queued():
    """The Celery enqueue of notice dispatches, captured instead of sent to a broker."""
    with mock.patch("cases.tasks.notice_dispatch_task.delay") as delay:
        yield delay


# --- transitions ------------------------------------------------------------------------------

def test_a_plain_post_transitions_and_redirects_back_to_the_case(client, analyst, case):
    client.force_login(analyst)
    with CountDelta() as delta:
        response = client.post(url("case_transition", case), {"transition": "triage", "expected_version": case.version})
    assert response.status_code == 302 and response["Location"].endswith(f"/cases/{case.reference}/#status")
    case.refresh_from_db()
    assert case.status == "triaged" and delta.case_events == 1 and delta.audit_events == 1
    follow = client.get(response["Location"])
    assert "Triage: CASE-" in follow.content.decode()


def test_an_htmx_transition_answers_with_the_page_body(client, analyst, case):
    client.force_login(analyst)
    response = client.post(url("case_transition", case), {"transition": "triage", "expected_version": case.version},
                           **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html and 'id="case-body"' in html
    assert 'id="case-status">Triaged<' in html and 'hx-swap-oob="innerHTML"' in html


def test_a_transition_against_an_old_version_says_the_case_changed_and_changes_nothing(
        client, analyst, analyst_b, case):
    seen_version = case.version
    services.case_transition(actor=analyst_b, case=case, transition="triage")  # someone else, meanwhile
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("case_transition", case),
                               {"transition": "start_review", "expected_version": seen_version}, **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert "changed while you were looking at it" in html and 'id="action-error"' in html
    assert response["HX-Reswap"] == "outerHTML show:#action-error:top"


def test_a_transition_without_a_required_reason_is_a_400_on_the_reason_field(client, supervisor, analyst, case):
    bring_case_to(case, "ready_for_decision", supervisor=supervisor, analyst=analyst)
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("case_transition", case),
                               {"transition": "decide", "expected_version": case.version, "reason": "  "})
    assert response.status_code == 400
    assert "Decide needs a reason; write one and try again." in response.content.decode()


def test_a_role_that_may_not_transition_gets_a_403_and_nothing_changes(client, analyst, supervisor, case):
    bring_case_to(case, "ready_for_decision", supervisor=supervisor, analyst=analyst)
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("case_transition", case),
                               {"transition": "decide", "expected_version": case.version, "reason": "Upheld."})
    assert response.status_code == 403
    assert "Your role (analyst) cannot decide a case" in response.content.decode()


def test_a_transition_not_possible_now_is_a_409_with_what_is_possible(client, analyst, case):
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("case_transition", case), {"transition": "mark_ready",
                                                              "expected_version": case.version})
    assert response.status_code == 409
    assert "Possible now: triage" in response.content.decode()


@pytest.mark.parametrize("data", [{}, {"transition": "fly", "expected_version": "1"},
                                  {"transition": "triage", "expected_version": "abc"}])
def test_malformed_transition_posts_are_400_never_500(client, analyst, case, data):
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("case_transition", case), data)
    assert response.status_code == 400


def test_an_auditor_posting_an_action_is_refused_and_nothing_changes(client, auditor, case):
    client.force_login(auditor)
    with assert_nothing_changed(case):
        response = client.post(url("evidence_add_text", case), {"title": "Note", "text": "Hi"})
    assert response.status_code == 403


def test_actions_on_another_tenants_case_are_404(client, outsider, case):
    client.force_login(outsider)
    with assert_nothing_changed(case):
        response = client.post(url("case_transition", case), {"transition": "triage", "expected_version": 2})
    assert response.status_code == 404 and case.title not in response.content.decode()


def test_actions_need_post(client, analyst, case):
    client.force_login(analyst)
    assert client.get(url("case_transition", case)).status_code == 405


# --- evidence ---------------------------------------------------------------------------------

def test_text_evidence_is_added_through_htmx(client, analyst, case):
    client.force_login(analyst)
    with CountDelta() as delta:
        response = client.post(url("evidence_add_text", case),
                               {"title": "Call notes", "text": "The bank promised a refund.", "source": "phone"},
                               **HTMX)
    assert response.status_code == 200 and delta.evidence == 1 and delta.audit_events == 1
    assert "Call notes" in response.content.decode()


def test_empty_text_evidence_shows_field_errors_and_adds_nothing(client, analyst, case):
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("evidence_add_text", case), {"title": "", "text": ""}, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="id_text_title_error"' in html and 'id="id_text_text_error"' in html
    assert 'id="evidence-add-text" open' in html


def test_a_file_is_uploaded_as_evidence(client, analyst, case):
    client.force_login(analyst)
    upload = SimpleUploadedFile("letter.txt", b"Dear consumer", content_type="text/plain")
    with CountDelta() as delta:
        response = client.post(url("evidence_upload", case), {"title": "Bank letter", "file": upload})
    assert response.status_code == 302 and delta.evidence == 1
    assert case.evidence.get(title="Bank letter").filename == "letter.txt"


def test_a_file_of_a_refused_type_is_a_400_on_the_file_field(client, analyst, case):
    client.force_login(analyst)
    upload = SimpleUploadedFile("run.exe", b"MZ...", content_type="application/x-msdownload")
    with assert_nothing_changed(case):
        response = client.post(url("evidence_upload", case), {"title": "Program", "file": upload}, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert "Files of type application/x-msdownload are not accepted" in html
    assert 'id="id_file_file_error"' in html


def test_a_file_over_the_limit_is_a_400_that_names_the_limit(client, analyst, case, settings):
    settings.EVIDENCE_MAX_BYTES = 10
    client.force_login(analyst)
    upload = SimpleUploadedFile("big.txt", b"x" * 11, content_type="text/plain")
    with assert_nothing_changed(case):
        response = client.post(url("evidence_upload", case), {"title": "Big", "file": upload})
    assert response.status_code == 400
    assert "the limit is 10 bytes" in response.content.decode()


def test_evidence_on_a_closed_case_is_a_409(client, analyst, supervisor, case):
    bring_case_to(case, "closed", supervisor=supervisor, analyst=analyst)
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("evidence_add_text", case), {"title": "Late", "text": "More."})
    assert response.status_code == 409
    assert "reopen it before adding evidence" in response.content.decode()


# --- proposals --------------------------------------------------------------------------------

def test_an_analyst_proposes_a_risk_level(client, analyst, case):
    client.force_login(analyst)
    with CountDelta() as delta:
        response = client.post(url("proposal_create", case),
                               {"kind": "risk_level", "risk_level": "high", "rationale": "Loss over $1,000."}, **HTMX)
    assert response.status_code == 200 and delta.proposals == 1
    proposal = case.proposals.get()
    assert proposal.payload == {"risk_level": "high"} and proposal.proposer_id == f"user:{analyst.pk}"


def test_a_proposal_without_its_value_shows_the_field_error(client, analyst, case):
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("proposal_create", case), {"kind": "risk_level", "rationale": ""}, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert "Choose the risk level you propose." in html and 'id="proposal-new" open' in html


def test_a_service_refusal_of_a_proposal_lands_on_the_right_field(client, analyst, case):
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("proposal_create", case),
                               {"kind": "status_transition", "transition": "decide", "rationale": "Done."}, **HTMX)
    assert response.status_code == 409  # the case's state refuses it (a new case cannot be decided)
    assert response.context["proposal_form"].errors["transition"] == [
        f"{case.reference} is new; decide is not possible from there."]


def test_a_supervisor_approves_an_agent_proposal_and_the_case_changes(client, supervisor, agent, case):
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    client.force_login(supervisor)
    evidence = ",".join(str(pk) for pk in case.evidence.values_list("pk", flat=True))
    response = client.post(url("proposal_approve", case, proposal.pk),
                           {"note": "Agreed.", "expected_version": case.version, "evidence_seen": evidence}, **HTMX)
    assert response.status_code == 200
    case.refresh_from_db()
    proposal.refresh_from_db()
    assert case.risk_level == "high" and proposal.status == ProposalStatus.APPLIED
    assert "Proposal approved and applied" in response.content.decode()


def test_the_proposer_cannot_approve_their_own_proposal(client, supervisor, case):
    proposal = services.proposal_create(actor=supervisor, case=case, kind="risk_level",
                                        payload={"risk_level": "low"}, rationale="Minor.")
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("proposal_approve", case, proposal.pk), {"expected_version": case.version},
                               **HTMX)
    assert response.status_code == 403
    assert "four eyes" in response.content.decode()


def test_approving_a_stale_proposal_is_a_409_that_explains_and_changes_nothing(
        client, supervisor, analyst, agent, case):
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    rival = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                     rationale="Small loss.")
    services.proposal_approve(actor=supervisor, proposal=rival)
    case.refresh_from_db()
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("proposal_approve", case, proposal.pk), {"expected_version": case.version},
                               **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert "risk level changed from unassessed to low" in html and "Out of date: risk level changed" in html
    assert "Ask the agents again" in html


def test_a_change_while_the_page_was_open_is_a_409_conflict(client, supervisor, analyst, agent, case):
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    seen = case.version
    services.evidence_add(actor=analyst, case=case, title="New fact", text="The bank refunded half.")
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("proposal_approve", case, proposal.pk), {"expected_version": seen}, **HTMX)
    assert response.status_code == 409
    assert f"you saw version {seen}" in response.content.decode()


def test_evidence_added_since_a_proposal_is_listed_on_its_card(client, supervisor, analyst, agent, case):
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    added = services.evidence_add(actor=analyst, case=case, title="Bank reply", text="The bank refunded half.")
    client.force_login(supervisor)
    html = client.get(reverse("web:case_detail", kwargs={"reference": case.reference})).content.decode()
    card = html[html.index(f'id="proposal-{proposal.pk}"'):]
    card = card[:card.index("</article>")]
    assert "Evidence added since this proposal" in card and f'href="#evidence-{added.pk}"' in card
    assert "badge--stale" not in card


def test_ask_the_agents_again_starts_a_focused_audited_run(client, supervisor, analyst, agent, case):
    from audit.models import AuditEvent
    from runs.models import AgentRun

    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    rival = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                     rationale="Small loss.")
    services.proposal_approve(actor=supervisor, proposal=rival)
    client.force_login(supervisor)
    with assert_nothing_changed(case, extra={"runs": lambda: AgentRun.objects.count()}):
        response = client.post(url("proposal_reask", case, rival.pk), **HTMX)  # applied, not stale
    assert response.status_code == 409
    response = client.post(url("proposal_reask", case, proposal.pk), **HTMX)
    assert response.status_code == 200
    run = AgentRun.objects.get()
    assert (run.graph, run.case_id, run.input["reask_proposal_id"]) == ("case_analysis", case.pk, proposal.pk)
    assert "risk level changed from unassessed to low" in run.input["question"]
    started = AuditEvent.objects.get(action="runs.run.started")
    assert started.payload["input"]["reask_proposal_id"] == proposal.pk


def test_rejecting_needs_a_note(client, supervisor, agent, case):
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("proposal_reject", case, proposal.pk), {"note": ""}, **HTMX)
    assert response.status_code == 400
    assert "Say why you reject it" in response.content.decode()
    response = client.post(url("proposal_reject", case, proposal.pk), {"note": "Not supported by evidence."}, **HTMX)
    proposal.refresh_from_db()
    assert response.status_code == 200 and proposal.status == ProposalStatus.REJECTED


def test_the_proposer_withdraws_a_proposal(client, analyst, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                        rationale="Minor.")
    client.force_login(analyst)
    response = client.post(url("proposal_withdraw", case, proposal.pk))
    proposal.refresh_from_db()
    assert response.status_code == 302 and proposal.status == ProposalStatus.WITHDRAWN


def test_a_proposal_of_another_case_is_not_found_through_this_case(client, supervisor, analyst, agent, case):
    from tests.factories import make_case

    other = make_case(actor=analyst, title="Other case")
    proposal = services.proposal_create(actor=agent, case=other, kind="risk_level", payload={"risk_level": "low"},
                                        rationale="Minor.")
    client.force_login(supervisor)
    with assert_nothing_changed(case, other):
        response = client.post(url("proposal_approve", case, proposal.pk), {})
    assert response.status_code == 404


# --- notices ----------------------------------------------------------------------------------

def _pending_notice(analyst, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="We received your complaint",
                                   body="We are looking into it.")
    return services.notice_submit(actor=analyst, notice=notice)


def test_a_notice_is_drafted_edited_and_submitted(client, analyst, case):
    client.force_login(analyst)
    response = client.post(url("notice_draft", case), {"recipient": "c@example.org", "subject": "Hello",
                                                       "body": "First text."}, **HTMX)
    assert response.status_code == 200
    notice = case.notices.get()
    response = client.post(url("notice_edit", case, notice.pk), {"recipient": "c@example.org", "subject": "Hello",
                                                                 "body": "Better text."}, **HTMX)
    notice.refresh_from_db()
    assert response.status_code == 200 and notice.body == "Better text." and notice.version == 2
    client.post(url("notice_submit", case, notice.pk), **HTMX)
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.PENDING_APPROVAL


def test_a_notice_with_a_bad_recipient_shows_the_field_error(client, analyst, case):
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(url("notice_draft", case), {"recipient": "nobody", "subject": "", "body": "x"}, **HTMX)
    assert response.status_code == 400
    form = response.context["notice_form"]
    assert set(form.errors) == {"recipient", "subject"}


def test_the_approve_form_carries_the_hash_the_approver_saw(client, supervisor, analyst, case):
    notice = _pending_notice(analyst, case)
    client.force_login(supervisor)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    assert f'name="content_hash" value="{notice.content_hash}"' in html


def test_a_supervisor_approves_a_notice(client, supervisor, analyst, case):
    notice = _pending_notice(analyst, case)
    client.force_login(supervisor)
    response = client.post(url("notice_approve", case, notice.pk), {"content_hash": notice.content_hash}, **HTMX)
    notice.refresh_from_db()
    assert response.status_code == 200 and notice.status == NoticeStatus.APPROVED


def test_approving_a_notice_whose_text_changed_is_stale_and_changes_nothing(client, supervisor, analyst, case):
    notice = _pending_notice(analyst, case)
    seen_hash = notice.content_hash
    services.notice_edit(actor=analyst, notice=notice, body="A different promise.")
    services.notice_submit(actor=analyst, notice=notice)
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("notice_approve", case, notice.pk), {"content_hash": seen_hash}, **HTMX)
    assert response.status_code == 409
    assert "The notice changed since you opened it" in response.content.decode()


def test_the_drafter_cannot_approve_their_notice(client, supervisor, case):
    notice = _pending_notice(supervisor, case)
    client.force_login(supervisor)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    assert "another supervisor must approve it" in html
    with assert_nothing_changed(case):
        response = client.post(url("notice_approve", case, notice.pk), {"content_hash": notice.content_hash})
    assert response.status_code == 403


def test_rejecting_a_notice_needs_a_reason(client, supervisor, analyst, case):
    notice = _pending_notice(analyst, case)
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(url("notice_reject", case, notice.pk), {"note": ""}, **HTMX)
    assert response.status_code == 400 and "Say why you reject the notice" in response.content.decode()
    client.post(url("notice_reject", case, notice.pk), {"note": "Tone is wrong."}, **HTMX)
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.REJECTED


def test_withdrawing_a_notice(client, analyst, case):
    notice = _pending_notice(analyst, case)
    client.force_login(analyst)
    client.post(url("notice_withdraw", case, notice.pk), **HTMX)
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.WITHDRAWN


def test_sending_an_approved_notice_queues_its_dispatch_after_commit(
        client, supervisor, analyst, case, queued, django_capture_on_commit_callbacks):
    notice = _pending_notice(analyst, case)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    client.force_login(analyst)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url("notice_send", case, notice.pk), **HTMX)
    assert response.status_code == 200 and "Sending: the notice" in response.content.decode()
    queued.assert_called_once_with(notice.pk, analyst.pk)


def test_the_queued_dispatch_sends_the_email_once(supervisor, analyst, case, mailoutbox):
    from cases.tasks import notice_dispatch_task

    notice = _pending_notice(analyst, case)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    assert notice_dispatch_task.apply(args=(notice.pk, analyst.pk)).get() == "sent"
    assert notice_dispatch_task.apply(args=(notice.pk, analyst.pk)).get() == "already-sent"
    assert len(mailoutbox) == 1


def test_sending_an_unapproved_notice_is_a_409_and_queues_nothing(
        client, analyst, case, queued, django_capture_on_commit_callbacks):
    notice = _pending_notice(analyst, case)
    client.force_login(analyst)
    with assert_nothing_changed(case), django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client.post(url("notice_send", case, notice.pk), **HTMX)
    assert response.status_code == 409 and "Only an approved notice can be sent" in response.content.decode()
    assert callbacks == [] and not queued.called


def test_an_auditor_cannot_send_and_nothing_is_queued(
        client, auditor, supervisor, analyst, case, queued, django_capture_on_commit_callbacks):
    notice = _pending_notice(analyst, case)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    client.force_login(auditor)
    with assert_nothing_changed(case), django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client.post(url("notice_send", case, notice.pk))
    assert response.status_code == 403 and callbacks == [] and not queued.called


# --- after a refusal, the page shows what is current ----------------------------------------

def test_after_a_conflict_the_button_carries_the_new_version_and_keeps_the_reason(client, supervisor, analyst,
                                                                                   supervisor_b, case):
    bring_case_to(case, "ready_for_decision", supervisor=supervisor, analyst=analyst)
    seen = case.version
    services.evidence_add(actor=supervisor_b, case=case, title="Late fact", text="Refund issued.")  # meanwhile
    client.force_login(supervisor)
    response = client.post(url("case_transition", case), {"transition": "decide", "expected_version": seen,
                                                          "reason": "Complaint upheld; refund due.",
                                                          "confirm_reason": "Notice follows."}, **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    case.refresh_from_db()
    assert f'name="expected_version" value="{case.version}" id="id_decide_expected_version"' in html
    assert "Complaint upheld; refund due.</textarea>" in html
    retry = client.post(url("case_transition", case), {"transition": "decide", "expected_version": case.version,
                                                       "reason": "Complaint upheld; refund due.",
                                                       "confirm_reason": "Notice follows."}, **HTMX)
    assert retry.status_code == 200


def test_a_refusal_whose_button_is_gone_is_shown_at_the_top(client, analyst, analyst_b, case):
    seen = case.version
    services.case_transition(actor=analyst_b, case=case, transition="triage")
    client.force_login(analyst)
    response = client.post(url("case_transition", case), {"transition": "triage", "expected_version": seen},
                           **HTMX)
    html = response.content.decode()
    assert response.status_code == 409 and html.count('id="action-error"') == 1
    assert html.index('id="action-error"') < html.index('id="status"')


def test_a_refusal_in_a_section_that_is_not_shown_is_still_shown(client, supervisor, analyst, case):
    bring_case_to(case, "closed", supervisor=supervisor, analyst=analyst)
    client.force_login(supervisor)
    response = client.post(url("evidence_add_text", case), {"title": "Late", "text": "More."}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 409 and 'id="action-error"' in html
    assert "reopen it before adding evidence" in html


def test_after_a_stale_notice_approval_the_form_carries_the_current_hash(client, supervisor, analyst, case):
    notice = _pending_notice(analyst, case)
    seen = notice.content_hash
    services.notice_edit(actor=analyst, notice=notice, body="A different promise.")
    services.notice_submit(actor=analyst, notice=notice)
    notice.refresh_from_db()
    client.force_login(supervisor)
    response = client.post(url("notice_approve", case, notice.pk), {"content_hash": seen, "note": "Looks fine."},
                           **HTMX)
    html = response.content.decode()
    assert response.status_code == 409
    assert f'name="content_hash" value="{notice.content_hash}"' in html and f'value="{seen}"' not in html
    assert "Looks fine.</textarea>" in html


def test_an_earlier_editor_of_a_notice_is_not_offered_the_approval(client, supervisor, supervisor_b, analyst, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Hello", body="First text.")
    services.notice_edit(actor=supervisor, notice=notice, body="Supervisor's text.")
    services.notice_edit(actor=analyst, notice=notice, body="Analyst's final text.")
    services.notice_submit(actor=analyst, notice=notice)
    client.force_login(supervisor)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    assert "Approve this text" not in html and "another supervisor must approve it" in html
    client.force_login(supervisor_b)
    assert "Approve this text" in client.get(reverse("web:case_detail", args=[case.reference])).content.decode()


def test_the_person_who_asked_an_agent_for_a_proposal_is_not_offered_the_decision(client, supervisor, agent, case):
    services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Asked in chat.", requested_by=supervisor)
    client.force_login(supervisor)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    assert "Approve and apply" not in html and "at the request of <strong>supervisor</strong>" in html


# --- grounded notices on the card ----------------------------------------------------

def test_the_notice_card_shows_the_checker_flags_and_approval_needs_a_reason(client, supervisor, analyst, case):
    from cases.models import Approval
    from core.actors import Actor

    drafter = Actor.agent("notice_drafter", "2")
    notice = services.notice_draft(actor=drafter, case=case, subject="Acknowledgement",
                                   body="We have refunded the double charge. Our response follows by 2019-03-01.")
    services.notice_submit(actor=analyst, notice=notice)
    client.force_login(supervisor)
    page = client.get(reverse("web:case_detail", kwargs={"reference": case.reference})).content.decode()
    card = page[page.index(f'id="notice-{notice.pk}"'):]
    card = card[:card.index("</article>")]
    assert "Notice checker: 2 flags" in card and "unrecorded_action" in card and "past_date" in card
    assert 'name="confirm_reason"' in card
    with assert_nothing_changed(case):
        refused = client.post(url("notice_approve", case, notice.pk), {"content_hash": notice.content_hash}, **HTMX)
    assert refused.status_code == 400 and "flagged this notice" in refused.content.decode()
    response = client.post(url("notice_approve", case, notice.pk),
                           {"content_hash": notice.content_hash, "confirm_reason": "Refund confirmed by phone."},
                           **HTMX)
    assert response.status_code == 200
    approval = Approval.objects.get(notice=notice)
    assert approval.override_reason == "Refund confirmed by phone."
    assert "Approved over 2 checker flags" in response.content.decode()


def test_the_review_inbox_shows_each_cases_due_dates(client, supervisor, analyst, agent, django_assert_max_num_queries):
    from datetime import date

    from cases.models import Case
    from tests.factories import make_case

    late = make_case(actor=analyst, title="Late", received_at=date(2020, 1, 6))
    services.proposal_create(actor=agent, case=late, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Loss.")
    for i in range(5):  # the inbox reads a bounded number of queries, however many rows
        other = make_case(actor=analyst, title=f"Other {i}")
        services.proposal_create(actor=agent, case=other, kind="risk_level", payload={"risk_level": "low"},
                                 rationale="Small.")
    client.force_login(supervisor)
    with django_assert_max_num_queries(12):
        html = client.get(reverse("web:review_inbox")).content.decode()
    late = Case.objects.get(pk=late.pk)
    assert f"Response due {late.response_due:%Y-%m-%d}" in html and "deadline-state--overdue" in html


def test_a_supervisor_extends_a_due_date_from_the_case_page(client, supervisor, analyst, case):
    from datetime import timedelta

    client.force_login(analyst)
    page = client.get(reverse("web:case_detail", kwargs={"reference": case.reference})).content.decode()
    assert "Extend a due date" not in page and f"{case.response_due:%Y-%m-%d}" in page
    client.force_login(supervisor)
    assert "Extend a due date" in client.get(reverse("web:case_detail", kwargs={"reference": case.reference})
                                             ).content.decode()
    until = case.close_due + timedelta(days=10)
    with assert_nothing_changed(case):
        refused = client.post(url("case_deadline_extend", case), {"deadline": "close", "until": until.isoformat(),
                                                                  "reason": "", "expected_version": case.version},
                              **HTMX)
    assert refused.status_code == 400 and "Say why the date moves" in refused.content.decode()
    response = client.post(url("case_deadline_extend", case), {"deadline": "close", "until": until.isoformat(),
                                                               "reason": "Consumer needs time.",
                                                               "expected_version": case.version}, **HTMX)
    assert response.status_code == 200
    case.refresh_from_db()
    assert case.close_due == until
