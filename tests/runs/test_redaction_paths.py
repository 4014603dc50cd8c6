"""Personal data never reaches a model, on any path: the case-analysis run (case
fields, evidence titles and text, memory), the chat run (the question and the thread's turns),
the thread summariser — checked in what the model was given and in the stored ModelCall."""

import json
import logging

import pytest

from agents.citations import EvidenceTexts, verify_citations
from cases import services as case_services
from conversations import services as conversation_services
from conversations.context import thread_context_build
from runs import memory as memory_services
from runs import services
from runs.models import AgentRun, Artifact, Checkpoint, Finding, ModelCall, RunStatus, Step
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
    assert "Letter from [email] about account number [account number]" in titles
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


# What a security review found verbatim in the stored model contexts of an analysis.
REVIEW_FINDINGS = ("my account number is 12345678", "acct. no. is 7788 9900", "+44 20 7946 0958", "555-1234",
                   "jane@localhost", "JOHN.DOE (at) example (dot) com", "card ending 4242", "12 elm street")
REVIEW_FRAGMENTS = ("12345678", "7788 9900", "7946 0958", "555-1234", "jane@localhost", "JOHN.DOE", "4242",
                    "12 elm street")


def _stored_text(run) -> dict[str, str]:
    """Everything the run stored, by where it is, as text."""
    dump = lambda rows: json.dumps(list(rows), default=str, ensure_ascii=False)  # noqa: E731
    return {
        "model calls": dump(ModelCall.objects.filter(run=run).values(
            "messages", "context", "source_refs", "raw_output", "validated_output", "error")),
        "steps": dump(Step.objects.filter(run=run).values("summary", "error")),
        "checkpoints": dump(Checkpoint.objects.filter(run=run).values("delta", "snapshot", "compacted",
                                                                      "compacted_items")),
        "findings": dump(Finding.objects.filter(run=run).values("summary", "data", "evidence_refs")),
        "artifacts": dump(Artifact.objects.filter(run=run).values("content", "source_refs")),
        "run": dump(AgentRun.objects.filter(pk=run.pk).values("input", "error", "prompt_versions")),
    }


def test_an_analysis_stores_none_of_the_personal_data_the_review_found(analyst, caplog):
    letter = ("I dispute the charges. Please write to jane@localhost or to JOHN.DOE (at) example (dot) com. "
              "So my account number is 12345678 and the loan acct. no. is 7788 9900. "
              "Call me on +44 20 7946 0958 or 555-1234 in the evening. "
              "The bank charged my card ending 4242 twice for $1,234.56 on 03/14/2023. "
              "I live at 12 elm street and nobody from the bank ever wrote to me there.")
    assert all(finding in letter for finding in REVIEW_FINDINGS)
    # The case title goes into the run's goal, kept in its state and checkpoints.
    case = make_case(actor=analyst, narrative=letter, title="Double charge, 12 elm street, call 555-1234")
    case_services.evidence_add(actor=analyst, case=case, title="Second letter", text=f"Again: {letter}")
    caplog.set_level(logging.DEBUG)

    run = drive(services.run_start(actor=analyst, case=case))

    assert run.status == RunStatus.COMPLETED, run.error
    assert ModelCall.objects.filter(run=run).count() >= 5
    assert case.evidence.filter(text__contains="12 elm street").count() == 2  # the originals stay in evidence
    stored = _stored_text(run) | {"logs": "\n".join(record.getMessage() for record in caplog.records)}
    leaks = {where: [fragment for fragment in REVIEW_FRAGMENTS if fragment in text] for where, text in stored.items()}
    assert leaks == {where: [] for where in stored}
    shown = json.dumps(ModelCall.objects.filter(run=run, agent="evidence_analyst").get().context["evidence"])
    for label in ("[email]", "[account number]", "[phone]", "[card]", "[address]"):
        assert label in shown
    # What the facts were still reaches the model: the amount and the date survive.
    assert "$1,234.56" in shown and "03/14/2023" in shown
    # Quotes of the redacted text verify against the text the model saw: none was dropped.
    assert not Finding.objects.filter(run=run, summary__contains="dropped").exists()


def test_citations_verify_against_the_redacted_text_the_model_saw(analyst):
    case = make_case(actor=analyst, narrative="Please call me on 555-1234 about the double charge of $40.")
    evidence_id = case.evidence.get().pk
    check = verify_citations(EvidenceTexts(case), [
        {"evidence_id": evidence_id, "quote": "Please call me on [phone] about the double charge"},
        {"evidence_id": evidence_id, "quote": "Please call me on 555-1234 about the double charge"},
    ])
    assert [c["quote"] for c in check.verified] == ["Please call me on [phone] about the double charge"]
    # The original is not what the model read: it does not verify, and the drop keeps no digits.
    assert check.dropped == [{"what": "citation", "evidence_id": evidence_id,
                              "quote": "Please call me on [phone] about the double charge",
                              "reason": f"the quote does not occur in E{evidence_id}"}]
