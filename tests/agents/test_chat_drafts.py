"""Chat that drafts: "draft a notice" drafts one through the notice checker, or says up front
that one exists (in words, with a link) and promises nothing; never an internal id."""

import re

import pytest

from agents.graphs.chat import compose_reply
from cases import services as case_services
from cases.models import Notice, NoticeStatus
from conversations import services
from runs import services as run_services
from tests.conversations.conftest import drive, post_and_answer

pytestmark = pytest.mark.django_db

NARRATIVE = ("The collector calls me at work every day and threatened to sue me. They charged me a fee of "
             "{$1500.00} that I never agreed to. I want a refund of {$1500.00} and I want the calls to stop.")
INTERNAL_ID = re.compile(r"\b[NPEMAF]\d+\b|#\d+\b(?!\S*notice)|\bpending_approval\b")


@pytest.fixture
def analysed(analyst):
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Collector calls",
                                     narrative=NARRATIVE, company="Collector Inc", received_at=None,
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    drive(run_services.run_start(actor=analyst, case=case, enqueue=False).pk, max_steps=30)
    return case


def _words_only(text: str) -> str:
    return re.sub(r"\(/cases/[^)]*\)", "", text)  # links may carry an anchor; the words may not carry ids


def test_a_pending_notice_is_named_up_front_and_nothing_is_promised(analyst, analysed):
    [pending] = Notice.objects.filter(case=analysed, status=NoticeStatus.PENDING_APPROVAL)
    thread = services.thread_create(actor=analyst, tenant=analyst.tenant, case=analysed, title="Questions")

    _q, reply, _run = post_and_answer(thread, analyst, "Draft a notice to the consumer.")

    first_sentence = reply.content.split(". ")[0]
    assert first_sentence.startswith("The response notice drafted on ")
    assert "waiting for approval" in first_sentence
    assert f"/cases/{analysed.reference}/#notice-{pending.pk}" in reply.content
    assert "I will draft" not in reply.content and "I drafted" not in reply.content
    assert list(Notice.objects.filter(case=analysed).values_list("pk", flat=True)) == [pending.pk]
    assert not INTERNAL_ID.search(_words_only(reply.content)), reply.content


def test_with_no_live_notice_chat_drafts_through_the_checker_and_links_it(analyst, analysed):
    for notice in Notice.objects.filter(case=analysed):
        case_services.notice_withdraw(actor=analyst, notice=notice)
    thread = services.thread_create(actor=analyst, tenant=analyst.tenant, case=analysed, title="Questions")

    _q, reply, run = post_and_answer(thread, analyst, "Draft a notice to the consumer.")

    [drafted] = Notice.objects.filter(case=analysed).exclude(status=NoticeStatus.WITHDRAWN)
    assert drafted.run_id == str(run.pk)
    assert f"I drafted a response notice (/cases/{analysed.reference}/#notice-{drafted.pk})" in reply.content
    assert "I will draft" not in reply.content  # what was done, never also what will be done
    if drafted.check_flags:  # flagged: left as a draft, the flags named in words
        assert drafted.status == NoticeStatus.DRAFT
        assert all(flag["message"].rstrip(".") in reply.content for flag in drafted.check_flags)
    else:
        assert drafted.status == NoticeStatus.PENDING_APPROVAL
        assert "the notice checker found nothing to correct" in reply.content
    assert not INTERNAL_ID.search(_words_only(reply.content)), reply.content


def test_a_draft_the_checker_keeps_back_is_not_also_promised_for_approval(analyst, analysed):
    """A flagged draft stays a draft: the reply says so, and does not also say it will be
    submitted for approval."""
    answer = ("No notice exists yet. I will draft a notice to the consumer and submit it for approval; nothing "
              "is sent until a supervisor approves it.")
    kept = {"kind": "draft_notice", "ok": True, "text": "I drafted a response notice (/cases/X/#notice-1), but "
                                                        "the notice checker found problems, so it stays a draft."}
    content = compose_reply(answer, [kept])
    assert "I will draft" not in content and "submit it for approval" not in content
    assert content.startswith("No notice exists yet.") and kept["text"] in content
