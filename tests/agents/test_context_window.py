"""A model with a small context window (OPENAI_CONTEXT_TOKENS, e.g. llama.cpp's n_ctx): the prompt
is fitted into it — the schema's long label lists left out of the text, then the evidence cut
keeping its beginning, with a line saying so — and quotes are still verified against the full
evidence. Against the local fake OpenAI server (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import pytest

from agents.context import CUT_NOTE
from agents.providers import RETRY_RESERVE, OpenAICompatibleProvider
from agents.schemas import NoticeDraftOutput
from cases import services as case_services
from core.tokens import count_message_tokens, count_tokens
from runs import services
from runs.executor import run_step
from runs.models import Finding, ModelCall
from runs.providers import ModelRequest
from tests.fakes.fixtures import fake_openai  # noqa: F401

pytestmark = pytest.mark.django_db

WINDOW = 3000
ANSWER = 300
# About 6,000 tokens: far more than the window; the request is its last sentence.
NARRATIVE = "My bank charged me an overdraft fee every month although my balance was positive. " * 300 + \
            "I want a refund of every overdraft fee."
LAST_SENTENCE = "I want a refund of every overdraft fee."


def _triage(evidence_id: int) -> dict:
    return {"product": "Checking or savings account", "sub_product": None, "issue": "Managing an account",
            "respondent": "Bank", "requested_remedy": "A refund", "confidence": 0.9,
            "evidence_refs": [evidence_id], "needs_analyst": False, "issue_confidence": 0.9,
            "narrative_product": None,
            "consumer_request": {"kind": "refund", "statement": "A refund of the overdraft fees",
                                 "quote": LAST_SENTENCE, "evidence_id": evidence_id}}


def test_the_prompt_is_fitted_and_a_quote_from_the_cut_part_still_verifies(analyst, settings, fake_openai):  # noqa: F811
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = fake_openai.base_url, "fake-model"
    settings.OPENAI_MAX_OUTPUT_TOKENS, settings.OPENAI_CONTEXT_TOKENS = ANSWER, WINDOW
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Overdraft fees",
                                     narrative=NARRATIVE, company="Bank", complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    evidence_id = case.evidence.get().pk
    fake_openai.reply_json(_triage(evidence_id))
    run = services.run_start(actor=analyst, case=case, provider="openai", enqueue=False)

    for _ in range(3):
        if Finding.objects.filter(run=run, type="triage").exists():
            break
        run_step(run_id=run.pk, worker_id="test-worker", enqueue=False)

    messages = fake_openai.requests[0].messages
    budget = OpenAICompatibleProvider.from_settings().prompt_budget(1200)
    assert count_message_tokens(messages) <= budget < WINDOW - ANSWER
    system, user = messages[0]["content"], messages[-1]["content"]
    assert "Credit reporting" not in system  # the long label lists are left out of the text
    assert "fixed values; the answer format lists them" in system
    assert CUT_NOTE.format(id=evidence_id) in user and LAST_SENTENCE not in user
    assert NARRATIVE[:200] in user  # the beginning is kept
    # The response format still holds the model to every label.
    assert "Checking or savings account" in fake_openai.requests[0].body["response_format"]["json_schema"]["schema"][
        "properties"]["product"]["enum"]
    call = ModelCall.objects.get(run=run, agent="triage")
    assert call.source_refs["context_cut"]["evidence"] == [evidence_id]
    assert call.context["evidence"][0]["cut"] is True
    # The quote lies in the part the model was not shown; it is verified against the whole evidence.
    triage = Finding.objects.get(run=run, type="triage")
    assert triage.data["consumer_request"]["quote"] == LAST_SENTENCE and triage.data["dropped_citations"] == []


def test_without_a_window_nothing_is_cut(analyst, settings, fake_openai):  # noqa: F811
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = fake_openai.base_url, "fake-model"
    settings.OPENAI_MAX_OUTPUT_TOKENS, settings.OPENAI_CONTEXT_TOKENS = ANSWER, 0
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Overdraft fees",
                                     narrative="I want a refund of every overdraft fee.", company="Bank",
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    fake_openai.reply_json(_triage(case.evidence.get().pk))
    run = services.run_start(actor=analyst, case=case, provider="openai", enqueue=False)

    for _ in range(3):
        if ModelCall.objects.filter(run=run, agent="triage").exists():
            break
        run_step(run_id=run.pk, worker_id="test-worker", enqueue=False)

    assert OpenAICompatibleProvider.from_settings().prompt_budget(1200) is None
    call = ModelCall.objects.get(run=run, agent="triage")
    assert "context_cut" not in call.source_refs and "cut" not in call.context["evidence"][0]
    assert "Credit reporting" in call.messages[0]["content"]  # the labels are in the schema text
    assert "is cut here" not in call.messages[-1]["content"]


def test_the_retry_is_shortened_to_fit_the_window(fake_openai):  # noqa: F811
    provider = OpenAICompatibleProvider(base_url=fake_openai.base_url, model="gemma", timeout=2,
                                        max_output_tokens=ANSWER, response_format="json_object",
                                        context_tokens=1200)
    budget = provider.prompt_budget(500)
    prompt = [{"role": "system", "content": "Draft a notice."},
              {"role": "user", "content": "The case. " * ((budget - 40) // 3)}]
    assert count_message_tokens(prompt) <= budget
    fake_openai.reply_content('{"subject": "S", "body": ' + '"x y z ' * 400 + '"}')  # not JSON: cut off
    fake_openai.reply_json({"subject": "Your complaint", "body": "We received your complaint."})

    response = provider.complete(ModelRequest(agent="notice_drafter", output_schema=NoticeDraftOutput,
                                              max_output_tokens=500, messages=prompt, context={}))

    assert response.attempts == 2 and response.output.subject == "Your complaint"
    retry = fake_openai.requests[1].messages
    assert count_message_tokens(retry) <= budget + RETRY_RESERVE
    assert retry[:2] == prompt and retry[2]["role"] == "assistant" and "not valid" in retry[3]["content"]
    assert count_tokens(retry[2]["content"]) < count_tokens('"x y z ' * 400)


def test_the_budget_leaves_room_for_the_answer_and_the_tokenizer():
    provider = OpenAICompatibleProvider(base_url="http://127.0.0.1:9/v1", model="m", max_output_tokens=400,
                                        context_tokens=4096)
    assert provider.prompt_budget(1200) == provider.prompt_budget(400) < 4096 - 400
    assert provider.prompt_budget(200) > provider.prompt_budget(400)
