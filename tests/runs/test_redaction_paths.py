"""Personal data never reaches a model, on any path: the case-analysis run (case
fields, evidence titles and text, memory), the chat run (the question and the thread's turns),
the thread summariser — checked in what the model was given and in the stored ModelCall."""

import json

import pytest

from cases import services as case_services
from conversations import services as conversation_services
from conversations.context import thread_context_build
from runs import memory as memory_services
from runs import services
from runs.models import ModelCall, RunStatus
from tests.conversations.conftest import post_and_answer
from tests.factories import make_case
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

EMAIL, PHONE, SSN = "pat.person@mail.example.com", "(555) 123-4567", "123-45-6789"
CARD, ACCOUNT, ADDRESS = "4111 1111 1111 1111", "account number 87654321", "123 Main Street, Springfield, IL 62704"
PERSONAL = f"Reach me at {EMAIL} or {PHONE}; SSN {SSN}; card {CARD}; {ACCOUNT}; I live at {ADDRESS}."
LEAKS = ("pat.person@", "123-4567", "123-45-6789", "4111 1111", "87654321", "123 Main Street")


@pytest.fixture
def thread(analyst, case):
    return conversation_services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Refund")


def _leaks(call: ModelCall) -> list[str]:
    seen = json.dumps([call.messages, call.context], default=str)
    return [leak for leak in LEAKS if leak in seen]


def test_an_analysis_run_sees_no_personal_data_in_case_fields_evidence_or_memory(analyst, supervisor):
    case = make_case(actor=analyst, title=f"Billing dispute, call {PHONE}", narrative=PERSONAL,
                     sub_issue=f"Wrote from {EMAIL}")
    case_services.evidence_add(actor=analyst, case=case, title=f"Letter from {EMAIL} about {ACCOUNT}",
                               text=f"Bank letter. {PERSONAL}")
    memory = memory_services.memory_propose(actor=analyst, tenant=analyst.tenant, subject=f"case:{case.reference}",
                                            content=f"Prefers calls on {PHONE}, post to {ADDRESS}.")
    memory_services.memory_confirm(actor=supervisor, memory=memory)

    run = drive(services.run_start(actor=analyst, case=case))

    assert run.status == RunStatus.COMPLETED, run.error
    calls = list(ModelCall.objects.filter(run=run))
    assert len(calls) >= 5
    assert {call.agent: _leaks(call) for call in calls} == {call.agent: [] for call in calls}
    triage = next(call for call in calls if call.agent == "triage")
    assert triage.context["case"]["title"] == "Billing dispute, call [phone]"
    titles = [e["title"] for e in triage.context["evidence"]]
    assert "Letter from [email] about account number [account]" in titles
    assert triage.context["memory"][0]["content"] == "Prefers calls on [phone], post to [address]."
    assert "[ssn]" in json.dumps(triage.context["evidence"]) and "[card]" in json.dumps(triage.context["evidence"])


def test_a_chat_run_sees_no_personal_data_in_the_question_or_earlier_turns(thread, analyst):
    post_and_answer(thread, analyst, f"My earlier note: {PERSONAL}")
    question, reply, run = post_and_answer(thread, analyst, f"Also my SSN is {SSN}, email {EMAIL}. What now?")

    assert run.status == RunStatus.COMPLETED, run.error
    call = ModelCall.objects.get(run=run, agent="chat")
    assert _leaks(call) == []
    assert call.context["question"] == "Also my SSN is [ssn], email [email]. What now?"
    earlier = [turn["content"] for turn in call.context["thread"]["recent"]]
    assert any("[phone]" in text and "[address]" in text for text in earlier)
    # The stored messages themselves are the people's record and stay as written.
    assert question.content.startswith("Also my SSN is 123-45-6789")


def test_the_thread_summariser_and_the_thread_context_see_no_personal_data(thread, analyst, settings):
    settings.CONVERSATIONS_KEEP_RECENT = 1
    for _ in range(2):
        post_and_answer(thread, analyst, f"Note: {PERSONAL}")
    context = thread_context_build(thread=thread)
    assert context.turns and not any(leak in turn.content for turn in context.turns for leak in LEAKS)

    run = drive(conversation_services.thread_compact(actor=analyst, thread=thread))

    assert run.status == RunStatus.COMPLETED, run.error
    call = ModelCall.objects.get(run=run, agent="thread_summarizer")
    assert _leaks(call) == []
    assert "[email]" in json.dumps(call.context["thread"])
