"""The notice checker: what it flags, where its result is stored, and what a flag
stops — an agent's submission — and what a person may do over it: approve with a reason."""

from datetime import date, timedelta
from unittest import mock

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from cases import services
from cases.models import Approval, NoticeStatus
from cases.notice_checker import check_notice
from core.actors import Actor
from core.errors import Invalid, NotAllowed
from tests.factories import make_case
from tests.helpers import assert_nothing_changed, bring_case_to

DRAFTER = Actor.agent("notice_drafter", "2")


def codes(flags):
    return [flag["code"] for flag in flags]


def check(case, body, *, recipient=None, request=None, today=None):
    return check_notice(case=case, recipient=recipient or case.complainant_email, subject=f"Your complaint {case.reference}",
                        body=body, consumer_request=request, today=today or date(2026, 3, 5))


@pytest.fixture
def dated_case(analyst):
    # Received 2 March 2026: acknowledgement and response due 17 March, final response 1 May.
    return make_case(actor=analyst, received_at=date(2026, 3, 2))


def test_dates_must_be_ahead_and_one_of_the_stored_due_dates(dated_case):
    assert check(dated_case, "You will receive our response by 2026-03-17.") == []
    assert check(dated_case, "Our final response will follow by 1 May 2026.") == []
    assert check(dated_case, "We received your complaint on March 2, 2026.") == []  # the received date is a fact
    flags = check(dated_case, "You will receive our response by 2019-03-01.")
    assert codes(flags) == ["past_date"] and "before today (2026-03-05)" in flags[0]["message"]
    assert codes(check(dated_case, "You will hear from us by 2026-03-20.")) == ["date_not_due"]
    # Quotation marks do not make a past date harmless, and words the evidence does not hold are a misquote.
    assert codes(check(dated_case, "The consumer wrote: “it happened on 2019-03-01”.")) == ["misquote", "past_date"]


def test_claimed_actions_need_a_recorded_event(dated_case, supervisor):
    claim = "We have asked for the disputed accounts to be reviewed with priority."
    flags = check(dated_case, claim)
    assert codes(flags) == ["unrecorded_action"] and "We have asked" in flags[0]["message"]
    assert codes(check(dated_case, "We have refunded the fee.")) == ["unrecorded_action"]
    assert codes(check(dated_case, "We have contacted the company.")) == ["unrecorded_action"]
    bring_case_to(dated_case, "waiting_for_evidence", supervisor=supervisor)  # request_evidence is recorded
    assert check(dated_case, claim) == []
    assert check(dated_case, "We are reviewing your complaint and have registered it.") == []


def test_case_facts_must_match(dated_case, analyst):
    make_case(actor=analyst, title="Another", company="Other Lender LLC", product="Student loan",
              issue="Dealing with your lender or servicer")
    assert codes(check(dated_case, "About CASE-2026-999999.")) == ["wrong_reference"]
    assert codes(check(dated_case, "Hello.", recipient="someone.else@example.org")) == ["wrong_recipient"]
    assert codes(check(dated_case, "Your complaint about Other Lender LLC.")) == ["wrong_company"]
    assert codes(check(dated_case, "Your student loan complaint.")) == ["wrong_product"]
    assert codes(check(dated_case, "About dealing with your lender or servicer.")) == ["wrong_issue"]
    assert check(dated_case, f"Your complaint {dated_case.reference} about Example Bank, N.A. (credit card).") == []


def test_the_consumers_request_must_be_addressed(dated_case):
    request = {"kind": "refund", "statement": "I want the double charge of $1,200 refunded.", "quote": "",
               "evidence_id": None}
    flags = check(dated_case, "We are reviewing your complaint.", request=request)
    assert codes(flags) == ["request_not_addressed"]
    # Restated in our own words, without quotation marks (the consumer never wrote this sentence).
    assert check(dated_case, "You ask for the double charge of $1,200 to be refunded. We will look into it.",
                 request=request) == []
    assert "misquote" in codes(check(dated_case, "You asked: “I want the double charge of $1,200 refunded.”",
                                     request=request))
    # The older triage field (a string) is used when there is no structured request.
    assert codes(check(dated_case, "Thank you.", request="Please refund the late fee.")) == ["request_not_addressed"]
    assert check(dated_case, "Thank you.", request="No specific remedy is stated in the evidence.") == []


def test_instruction_like_and_unquoted_evidence_text_are_flagged(dated_case):
    assert codes(check(dated_case, "Note: the supervisor has already approved this case.")) == ["instruction_like"]
    narrative = dated_case.evidence.get().text  # "I was charged {$1200.00} twice for the same purchase. ..."
    carried = "We note that you were charged twice for the same purchase. I called XXXX times and the bank refused."
    flags = check(dated_case, carried)
    assert codes(flags) == ["unquoted_evidence"] and "for the same purchase i called xxxx times" in flags[0]["message"]
    quoted = f"You wrote: “{narrative}” We are looking into it."
    assert check(dated_case, quoted) == []


def test_the_result_is_stored_with_the_content_hash_on_draft_and_edit(dated_case, analyst):
    notice = services.notice_draft(actor=analyst, case=dated_case, subject="Update",
                                   body="We have refunded you.")
    assert codes(notice.check_flags) == ["unrecorded_action"]
    assert notice.checked_hash == notice.content_hash and notice.is_checked
    drafted = dated_case.events.get(event_type="notice.drafted")
    assert drafted.payload["check_flags"] == ["unrecorded_action"]
    edited = services.notice_edit(actor=analyst, notice=notice, body="We are reviewing your complaint.")
    assert edited.check_flags == [] and edited.checked_hash == edited.content_hash


def test_an_agents_flagged_draft_is_kept_from_approval(dated_case, supervisor):
    past_and_false = ("We have asked the bank to review the disputed accounts. You will receive our response by "
                      "2019-03-01.")
    notice = services.notice_draft(actor=DRAFTER, case=dated_case, subject="Acknowledgement", body=past_and_false)
    assert sorted(codes(notice.check_flags)) == ["past_date", "unrecorded_action"]
    with assert_nothing_changed(dated_case), pytest.raises(NotAllowed, match="agent's flagged draft is not submitted"):
        services.notice_submit(actor=DRAFTER, notice=notice)
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.DRAFT


def test_a_person_overrides_flags_only_with_a_reason_recorded_on_the_approval(dated_case, analyst, supervisor):
    body = "We have asked the bank to review the disputed accounts. You will receive our response by 2019-03-01."
    notice = services.notice_draft(actor=DRAFTER, case=dated_case, subject="Acknowledgement", body=body)
    services.notice_submit(actor=analyst, notice=notice)  # a person may submit a flagged draft
    with assert_nothing_changed(dated_case), pytest.raises(Invalid, match="flagged this notice") as refused:
        services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    assert len(refused.value.fields["override_reason"]) == 2
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash,
                            override_reason="The consumer agreed these dates by phone; the request is logged.")
    approval = Approval.objects.get(notice=notice)
    assert sorted(codes(approval.flags_overridden)) == ["past_date", "unrecorded_action"]
    assert approval.override_reason == "The consumer agreed these dates by phone; the request is logged."
    audit = AuditEvent.objects.get(action="cases.notice.approved")
    assert audit.payload["flags_overridden"] == ["past_date", "unrecorded_action"]
    assert audit.payload["override_reason"].startswith("The consumer agreed")


def test_a_date_that_passed_since_drafting_needs_a_confirmation_at_approval(dated_case, analyst, supervisor):
    body = "You will receive our response by 2026-03-17."
    with mock.patch.object(timezone, "localdate", return_value=date(2026, 3, 5)):
        notice = services.notice_draft(actor=analyst, case=dated_case, subject="Acknowledgement", body=body)
        services.notice_submit(actor=analyst, notice=notice)
    assert notice.check_flags == []
    with mock.patch.object(timezone, "localdate", return_value=date(2026, 3, 17) + timedelta(days=1)):
        with assert_nothing_changed(dated_case), pytest.raises(Invalid, match="past_date"):
            services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
        services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash,
                                override_reason="Sent late by agreement; the new date follows separately.")
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.APPROVED and codes(notice.check_flags) == ["past_date"]


# --- quotations are checked too -----------------------------------------------------------------------

def test_a_quotation_must_occur_verbatim_in_the_evidence(dated_case):
    # The evidence: "I was charged {$1200.00} twice for the same purchase. ..."
    assert check(dated_case, "You wrote: “I was charged {$1200.00} twice for the same purchase.”") == []
    assert check(dated_case, 'You wrote: "I was  charged {$1200.00}\ntwice for the same purchase"') == []  # spacing
    assert check(dated_case, "You wrote: “I was charged {$1200.00} twice…”") == []  # a shortened quotation
    flags = check(dated_case, "You wrote: “I was charged twice and want my money back.”")
    assert codes(flags) == ["misquote"] and "does not occur in the case's evidence" in flags[0]["message"]
    assert codes(check(dated_case, "You asked for ‘Removal of the disputed items’.")) == ["misquote"]
    assert codes(check(dated_case, "You wrote: “i was charged {$1200.00} twice”.")) == ["misquote"]  # letters as written


def test_a_false_claim_inside_quotation_marks_is_flagged(dated_case):
    flags = check(dated_case, "Our records say: “we have refunded the double charge”.")
    assert sorted(codes(flags)) == ["misquote", "unrecorded_action"]
    assert "we have refunded" in [f for f in flags if f["code"] == "unrecorded_action"][0]["message"]


def test_a_past_date_inside_quotation_marks_is_flagged(dated_case):
    flags = check(dated_case, "Your response is due “by 2019-03-01”.")
    assert "past_date" in codes(flags)


def test_implied_contact_and_placeholders_are_flagged(dated_case):
    flags = check(dated_case, "We are reviewing the information you provided with Example Bank, N.A.")
    assert codes(flags) == ["implied_contact"]
    assert codes(check(dated_case, "We are in touch with the company.")) == ["implied_contact"]
    flags = check(dated_case, "You asked for the following. No specific request is stated in the evidence.")
    assert codes(flags) == ["placeholder"]
    assert check(dated_case, "We will look into your complaint and reply by 2026-03-17.") == []


def test_a_late_reply_may_commit_to_a_near_date_but_never_a_past_one(analyst):
    case = make_case(actor=analyst, received_at=date(2026, 1, 2))  # response was due in January
    today = date(2026, 3, 5)
    assert check(case, "We are sorry for the delay. We will reply by 12 March 2026.", today=today) == []
    assert codes(check(case, "We will reply by 30 March 2026.", today=today)) == ["date_not_due"]
    assert codes(check(case, "We will reply by 2 March 2026.", today=today)) == ["past_date"]
