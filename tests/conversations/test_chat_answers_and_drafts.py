"""Chat that does the job — "draft a notice to the consumer" drafts one through the
notice services; questions about the request, the risk and what is due are answered from the
analysis, in plain words."""

import pytest

from cases import services as case_services
from cases.models import Notice, NoticeDispatch, NoticeStatus
from conversations import services
from runs import services as run_services
from tests.conversations.conftest import drive, post_and_answer

pytestmark = pytest.mark.django_db

NARRATIVE = ("The collector calls me at work every day and threatened to sue me. They charged me a fee of "
             "{$1500.00} that I never agreed to. I want a refund of {$1500.00} and I want the calls to stop.")


@pytest.fixture
def analysed(analyst, supervisor):
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Collector calls",
                                     narrative=NARRATIVE, company="Collector Inc", received_at=None,
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = run_services.run_start(actor=analyst, case=case, enqueue=False)
    drive(run.pk, max_steps=30)
    # The analysis drafted the response notice; withdraw it so chat can draft a new one.
    for notice in Notice.objects.filter(case=case):
        case_services.notice_withdraw(actor=analyst, notice=notice)
    return case


def test_chat_drafts_a_notice_and_answers_in_plain_words(analyst, analysed, mailoutbox):
    thread = services.thread_create(actor=analyst, tenant=analyst.tenant, case=analysed, title="Questions")
    _q, reply, run = post_and_answer(thread, analyst, "Draft a notice to the consumer.")
    [notice] = Notice.objects.filter(case=analysed).exclude(status=NoticeStatus.WITHDRAWN)
    assert notice.status == NoticeStatus.PENDING_APPROVAL and notice.run_id == str(run.pk)
    assert not NoticeDispatch.objects.exists() and mailoutbox == []
    assert f"I drafted a response notice (/cases/{analysed.reference}/#notice-{notice.pk})" in reply.content
    assert "I will draft" not in reply.content  # what was done, not also a promise of it

    _q, wants, _run = post_and_answer(thread, analyst, "What does the consumer want?")
    assert "The consumer asks for: A refund of $1,500.00" in wants.content
    _q, why, _run = post_and_answer(thread, analyst, "Why high risk?")
    assert "harassment (+2)" in why.content and "“Complaint narrative”" in why.content
    for raw in ("pending_approval", "HARASSMENT", "[E"):
        assert raw not in wants.content + why.content
