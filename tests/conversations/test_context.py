"""The thread part of a chat context: summary + recent turns within the budget, at a cost that does
not depend on the thread's length."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import services
from conversations.context import thread_context_build
from conversations.models import REDACTED_PLACEHOLDER, Message
from core.actors import Actor
from core.tokens import count_tokens
from tests.conversations.conftest import fill_thread

CHAT = Actor.agent("chat", "1")


def summarise(thread, through, text="Earlier: the consumer disputes a double charge of $1,200; refund refused."):
    return services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=1, to_sequence=through,
                                          content=text, run_id="1", model_call_id="1")


def build_counting(thread, **kwargs):
    with CaptureQueriesContext(connection) as queries:
        context = thread_context_build(thread=thread, **kwargs)
    return context, queries


def test_a_5000_message_thread_uses_summary_plus_recent_turns_within_budget(thread, analyst, settings):
    fill_thread(thread, 5000, author=analyst)
    summary = summarise(thread, 4990)
    context, queries = build_counting(thread)
    assert context.summary_id == summary.pk
    assert context.summary_text.startswith("Earlier: the consumer disputes")
    assert [turn.sequence for turn in context.turns] == list(range(4991, 5001))
    assert context.tokens <= thread.context_token_budget
    assert context.needs_compaction is False
    assert len(queries) == 2  # latest summary + one bounded window of messages
    assert context.rows_read == 10
    as_dict = context.as_dict()
    assert as_dict["recent"][-1] == {"sequence": 5000, "role": "assistant",
                                     "content": Message.objects.get(thread=thread, sequence=5000).content}
    assert context.source_refs()["summary_to_sequence"] == 4990


def test_context_cost_is_the_same_for_500_and_5000_messages(analyst, case):
    measured = {}
    for length in (500, 5000):
        thread = services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title=f"{length}")
        fill_thread(thread, length, author=analyst)
        summarise(thread, length - 40)
        context, queries = build_counting(thread)
        measured[length] = (len(queries), context.rows_read, len(context.turns))
        assert context.tokens <= thread.context_token_budget
        assert context.turns[-1].sequence == length
    assert measured[500] == measured[5000]
    assert measured[5000][0] == 2


def test_without_a_summary_a_long_thread_reads_a_bounded_window_and_asks_for_compaction(thread, analyst,
                                                                                        settings):
    settings.CONVERSATIONS_CONTEXT_MAX_ROWS = 200
    fill_thread(thread, 5000, author=analyst)
    context, queries = build_counting(thread)
    assert len(queries) == 2
    message_sql = queries.captured_queries[1]["sql"]
    assert "LIMIT 201" in message_sql  # never the whole thread
    assert context.rows_read == 201
    assert context.needs_compaction is True
    assert context.tokens <= thread.context_token_budget
    sequences = [turn.sequence for turn in context.turns]
    assert sequences == list(range(5001 - len(sequences), 5001))  # a contiguous newest suffix
    assert len(sequences) >= settings.CONVERSATIONS_KEEP_RECENT


def test_older_turns_fill_newest_first_until_the_budget_then_compaction_is_due(thread, analyst):
    fill_thread(thread, 60, author=analyst, words=40)
    context = thread_context_build(thread=thread, budget=400)
    sequences = [turn.sequence for turn in context.turns]
    assert sequences == list(range(61 - len(sequences), 61))
    assert 6 <= len(sequences) < 60
    assert context.tokens <= 400
    assert context.needs_compaction is True
    # The next older message would not have fitted.
    next_older = Message.objects.get(thread=thread, sequence=sequences[0] - 1)
    assert context.tokens + 4 + count_tokens(next_older.content) > 400


def test_a_short_thread_fits_entirely_and_needs_no_compaction(thread, analyst):
    fill_thread(thread, 8, author=analyst)
    context = thread_context_build(thread=thread)
    assert [turn.sequence for turn in context.turns] == list(range(1, 9))
    assert context.needs_compaction is False
    assert context.summary_text == ""


def test_the_last_six_always_enter_truncated_if_they_must(thread, analyst):
    fill_thread(thread, 10, author=analyst, words=600)  # each message alone is over the budget
    context = thread_context_build(thread=thread, budget=300)
    assert [turn.sequence for turn in context.turns] == [5, 6, 7, 8, 9, 10]
    assert all(turn.is_truncated and turn.content.endswith("[truncated]") for turn in context.turns)
    assert context.tokens <= 300
    assert context.needs_compaction is True


def test_a_long_summary_is_cut_to_a_quarter_of_the_budget(thread, analyst):
    fill_thread(thread, 30, author=analyst)
    summarise(thread, 20, text="fact " * 2000)
    context = thread_context_build(thread=thread, budget=400)
    assert context.summary_tokens <= 100
    assert context.tokens <= 400


def test_redacted_messages_enter_contexts_as_the_placeholder(thread, analyst):
    messages = fill_thread(thread, 8, author=analyst)
    secret = Message.objects.get(pk=messages[2].pk)
    services.message_redact(actor=analyst, message=secret, reason="PII")
    context = thread_context_build(thread=thread)
    turn = next(t for t in context.turns if t.sequence == 3)
    assert (turn.content, turn.is_redacted) == (REDACTED_PLACEHOLDER, True)
    assert secret.content not in str(context.as_dict())
    assert context.source_refs()["redacted_sequences"] == [3]


def test_answering_a_message_sees_earlier_turns_and_their_replies_but_not_later_posts(thread, analyst):
    import hashlib

    def user(text):
        sequence = thread.last_sequence + 1
        message = Message.objects.create(tenant_id=thread.tenant_id, thread=thread, sequence=sequence, role="user",
                                         author_type="user", author_id=f"user:{analyst.pk}", author_user=analyst,
                                         content=text, content_sha256=hashlib.sha256(text.encode()).hexdigest())
        thread.last_sequence = sequence
        thread.save(update_fields=["last_sequence"])
        return message

    first, second, third = user("first?"), user("second?"), user("third?")
    services.message_append_assistant(actor=CHAT, thread=thread, in_reply_to=first, content="answer one",
                                      run_id="1")  # sequence 4, after the later posts
    context = thread_context_build(thread=thread, answering_sequence=second.sequence)
    assert [(t.sequence, t.content) for t in context.turns] == [(1, "first?"), (4, "answer one")]
    assert thread_context_build(thread=thread, answering_sequence=first.sequence).turns == []
    third_context = thread_context_build(thread=thread, answering_sequence=third.sequence)
    assert [t.sequence for t in third_context.turns] == [1, 2, 4]


@pytest.mark.parametrize("budget", [200, 1000, 3000])
def test_context_never_exceeds_its_budget(thread, analyst, budget):
    fill_thread(thread, 300, author=analyst, words=30)
    summarise(thread, 100, text="summary " * 500)
    assert thread_context_build(thread=thread, budget=budget).tokens <= budget



def test_answering_in_a_5000_message_thread_costs_the_same_as_in_a_500_message_one(analyst, case):
    """The whole chat step (admission, context, model call, reply, commit) — not only the builder —
    issues the same number of queries whatever the thread's length."""
    from runs.executor import run_step

    measured = {}
    for length in (500, 5000):
        thread = services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title=f"{length}")
        fill_thread(thread, length, author=analyst)
        summarise(thread, length - 20)
        question = services.message_post(actor=analyst, thread=thread, content="What is the status?")
        with CaptureQueriesContext(connection) as queries:
            outcome = run_step(run_id=int(question.reply_run_id), worker_id="w", enqueue=False)
        assert outcome.status == "completed"
        refs = Message.objects.get(in_reply_to=question).metadata["thread_context"]
        assert refs["tokens"] <= thread.context_token_budget
        assert refs["message_sequences"] == list(range(length - 19, length + 1))
        measured[length] = len(queries)
    assert measured[500] == measured[5000]
