"""conversations.services without runs: threads, assistant replies, redaction, summaries, and the
append-only guarantees. (Posting, which starts a chat run, is in test_chat.py.)"""

import hashlib

import pytest

from audit.models import AuditEvent
from conversations import services
from conversations.models import (
    REDACTED_PLACEHOLDER,
    AppendOnlyError,
    Message,
    MessageRedaction,
    Thread,
    ThreadSummary,
)
from core.actors import Actor
from core.errors import Conflict, Forbidden, Invalid, NotFound
from core.tokens import count_tokens
from tests.conversations.conftest import fill_thread
from tests.helpers import assert_nothing_changed

CHAT = Actor.agent("chat", "1")


def conversation_rows():
    return {
        "threads": sorted(Thread.objects.values_list("pk", "last_sequence")),
        "messages": Message.objects.count(),
        "redactions": MessageRedaction.objects.count(),
        "summaries": ThreadSummary.objects.count(),
    }


CONVERSATION_TABLES = {"conversations": conversation_rows}


def _insert(thread, author, text):
    """A user message written directly (posting through the service starts a run: test_chat.py)."""
    sequence = thread.last_sequence + 1
    message = Message.objects.create(
        tenant_id=thread.tenant_id, thread=thread, sequence=sequence, role="user", author_type="user",
        author_id=f"user:{author.pk}", author_user=author, content=text,
        content_sha256=hashlib.sha256(text.encode()).hexdigest())
    Thread.objects.filter(pk=thread.pk).update(last_sequence=sequence)
    thread.refresh_from_db()
    return message


# --- threads ---------------------------------------------------------------------------------

def test_thread_create_records_the_thread_and_audits_it_in_the_case_chain(analyst, case):
    thread = services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="  Refunds  ")
    assert (thread.title, thread.case_id, thread.created_by_id, thread.last_sequence) == ("Refunds", case.pk,
                                                                                         analyst.pk, 0)
    event = AuditEvent.objects.get(action="conversations.thread.created")
    assert (event.stream, event.actor_id, event.target_id) == (f"case:{case.pk}", f"user:{analyst.pk}",
                                                               str(thread.pk))


def test_thread_without_case_audits_in_the_tenant_chain(analyst):
    thread = services.thread_create(actor=analyst, tenant=analyst.tenant, title="General questions")
    assert AuditEvent.objects.get(action="conversations.thread.created").stream == f"tenant:{analyst.tenant_id}"
    assert thread.case_id is None


@pytest.mark.parametrize("who,error", [("auditor", Forbidden), ("agent", Forbidden), ("outsider", NotFound)])
def test_thread_create_refusals_change_nothing(request, who, error, case, tenant):
    actor = request.getfixturevalue(who)
    with assert_nothing_changed(case, extra=CONVERSATION_TABLES), pytest.raises(error):
        services.thread_create(actor=actor, tenant=tenant, case=case, title="Sneaky")


def test_thread_create_refuses_another_tenants_case(outsider, case):
    with assert_nothing_changed(case, extra=CONVERSATION_TABLES), pytest.raises(NotFound):
        services.thread_create(actor=outsider, tenant=outsider.tenant, case=case, title="Peek")


def test_thread_create_refuses_an_empty_title_and_a_tiny_budget(analyst, case):
    with assert_nothing_changed(case, extra=CONVERSATION_TABLES), pytest.raises(Invalid) as caught:
        services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="  ", token_budget=50)
    assert set(caught.value.fields) == {"title", "token_budget"}


# --- assistant replies -----------------------------------------------------------------------

def test_assistant_reply_takes_the_next_sequence_records_run_and_citations(thread, analyst, case):
    question = _insert(thread, analyst, "What is the status?")
    reply = services.message_append_assistant(
        actor=CHAT, thread=thread, in_reply_to=question, content="The case is new (version 2).", run_id="77",
        cited={"case_status": "new", "case_version": 2, "artifact_ids": [5]}, metadata={"intents": []})
    assert (reply.sequence, reply.role, reply.author_id, reply.run_id) == (2, "assistant", "agent:chat@1", "77")
    assert (reply.cited_case_status, reply.cited_case_version) == ("new", 2)
    assert reply.metadata == {"intents": [], "cited": {"case_status": "new", "case_version": 2, "artifact_ids": [5]}}
    assert reply.in_reply_to_id == question.pk
    thread.refresh_from_db()
    assert thread.last_sequence == 2
    event = AuditEvent.objects.get(action="conversations.message.answered")
    assert (event.run_id, event.payload["in_reply_to"], event.stream) == ("77", question.pk, f"case:{case.pk}")
    assert "The case is new" not in str(event.payload)  # content never enters the audit, its hash does
    assert event.payload["content_sha256"] == reply.content_sha256


def test_assistant_reply_is_idempotent_per_user_message(thread, analyst):
    question = _insert(thread, analyst, "Hello?")
    first = services.message_append_assistant(actor=CHAT, thread=thread, in_reply_to=question, content="Hi.",
                                               run_id="1")
    with assert_nothing_changed(extra=CONVERSATION_TABLES):
        again = services.message_append_assistant(actor=CHAT, thread=thread, in_reply_to=question,
                                                  content="Hi again.", run_id="1")
    assert again.pk == first.pk


def test_a_person_cannot_write_an_assistant_reply(thread, analyst):
    question = _insert(thread, analyst, "Hello?")
    with assert_nothing_changed(extra=CONVERSATION_TABLES), pytest.raises(Forbidden):
        services.message_append_assistant(actor=analyst, thread=thread, in_reply_to=question, content="Me!",
                                          run_id="1")


def test_a_reply_must_answer_a_user_message_of_the_same_thread(thread, analyst, case):
    other = services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Other")
    foreign = _insert(other, analyst, "Elsewhere")
    with assert_nothing_changed(extra=CONVERSATION_TABLES), pytest.raises(Invalid):
        services.message_append_assistant(actor=CHAT, thread=thread, in_reply_to=foreign, content="x", run_id="1")


# --- append-only -----------------------------------------------------------------------------

def test_messages_cannot_be_updated_or_deleted(thread, analyst):
    message = _insert(thread, analyst, "Original words")
    message.content = "Rewritten"
    with pytest.raises(AppendOnlyError):
        message.save()
    with pytest.raises(AppendOnlyError):
        message.delete()
    with pytest.raises(AppendOnlyError):
        Message.objects.filter(pk=message.pk).update(content="Rewritten")
    with pytest.raises(AppendOnlyError):
        Message.objects.filter(pk=message.pk).delete()
    assert Message.objects.get(pk=message.pk).content == "Original words"


# --- redaction -------------------------------------------------------------------------------

def test_author_redacts_own_message_content_hidden_original_kept_audit_keeps_the_fact(thread, analyst, case):
    message = _insert(thread, analyst, "My card number is 4111 1111 1111 1111")
    redaction = services.message_redact(actor=analyst, message=message, reason="Card number pasted by mistake")
    stored = Message.objects.select_related("redaction").get(pk=message.pk)
    assert stored.content == "My card number is 4111 1111 1111 1111"  # the original is never edited
    assert stored.display_content == REDACTED_PLACEHOLDER
    event = AuditEvent.objects.get(action="conversations.message.redacted")
    assert (event.actor_id, event.target_id, event.stream) == (f"user:{analyst.pk}", str(message.pk),
                                                               f"case:{case.pk}")
    assert event.payload["reason"] == "Card number pasted by mistake"
    assert event.payload["content_sha256"] == message.content_sha256
    assert event.payload["redaction_id"] == redaction.pk
    assert "4111" not in str(event.payload)


def test_supervisor_may_redact_someone_elses_message(thread, analyst, supervisor):
    message = _insert(thread, analyst, "Personal details")
    services.message_redact(actor=supervisor, message=message, reason="PII")
    assert MessageRedaction.objects.get(message=message).redacted_by == f"user:{supervisor.pk}"


@pytest.mark.parametrize("who,error", [("analyst_b", Forbidden), ("auditor", Forbidden), ("outsider", NotFound),
                                       ("agent", Forbidden)])
def test_redaction_refusals_change_nothing(request, who, error, thread, analyst, case):
    message = _insert(thread, analyst, "Personal details")
    actor = request.getfixturevalue(who)
    with assert_nothing_changed(case, extra=CONVERSATION_TABLES), pytest.raises(error):
        services.message_redact(actor=actor, message=message, reason="because")


def test_redaction_needs_a_reason_and_happens_once(thread, analyst, case):
    message = _insert(thread, analyst, "Personal details")
    with assert_nothing_changed(case, extra=CONVERSATION_TABLES), pytest.raises(Invalid):
        services.message_redact(actor=analyst, message=message, reason="   ")
    services.message_redact(actor=analyst, message=message, reason="PII")
    with assert_nothing_changed(case, extra=CONVERSATION_TABLES), pytest.raises(Conflict):
        services.message_redact(actor=analyst, message=message, reason="again")


# --- summaries -------------------------------------------------------------------------------

def test_summary_record_extends_the_latest_and_is_idempotent(thread, analyst):
    fill_thread(thread, 40, author=analyst)
    first = services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=1, to_sequence=20,
                                           content="Turns 1-20: refund asked.", run_id="9", model_call_id="31")
    assert (first.from_sequence, first.to_sequence, first.previous_id) == (1, 20, None)
    assert first.token_count == count_tokens("Turns 1-20: refund asked.")
    with assert_nothing_changed(extra=CONVERSATION_TABLES):
        again = services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=1, to_sequence=20,
                                               content="different", run_id="9", model_call_id="31")
    assert again.pk == first.pk
    second = services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=1, to_sequence=34,
                                            content="Turns 1-34.", run_id="10", model_call_id="40",
                                            key_facts=["refund"])
    assert (second.previous_id, second.key_facts) == (first.pk, ["refund"])
    event = AuditEvent.objects.filter(action="conversations.summary.recorded").order_by("sequence").last()
    assert (event.run_id, event.payload["model_call_id"], event.payload["to_sequence"]) == ("10", "40", 34)
    assert Message.objects.filter(thread=thread).count() == 40  # originals stay


@pytest.mark.parametrize("from_sequence,to_sequence,field", [
    (1, 15, "to_sequence"),   # does not extend the latest (1..20)
    (5, 30, "from_sequence"),  # must fold in the previous summary: start at 1
    (1, 41, "to_sequence"),   # beyond the thread
])
def test_summary_record_refuses_a_range_that_does_not_extend_the_latest(thread, analyst, from_sequence,
                                                                         to_sequence, field):
    fill_thread(thread, 40, author=analyst)
    services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=1, to_sequence=20, content="s",
                                   run_id="9", model_call_id="31")
    with assert_nothing_changed(extra=CONVERSATION_TABLES), pytest.raises(Invalid) as caught:
        services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=from_sequence,
                                       to_sequence=to_sequence, content="s2", run_id="10", model_call_id="32")
    assert field in caught.value.fields


def test_a_person_cannot_write_a_summary(thread, analyst):
    fill_thread(thread, 10, author=analyst)
    with assert_nothing_changed(extra=CONVERSATION_TABLES), pytest.raises(Forbidden):
        services.thread_summary_record(actor=analyst, thread=thread, from_sequence=1, to_sequence=4,
                                       content="mine", run_id="1", model_call_id="1")


def test_compaction_window_keeps_the_recent_turns_and_follows_the_latest_summary(thread, analyst, settings):
    settings.CONVERSATIONS_COMPACTION_BATCH = 50
    assert services.compaction_window(thread=thread) is None
    fill_thread(thread, 6, author=analyst)
    assert services.compaction_window(thread=thread) is None  # only the kept recent turns
    fill_thread(thread, 114, author=analyst, start=7)
    assert services.compaction_window(thread=thread) == (1, 50)  # one batch at a time
    services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=1, to_sequence=50, content="s",
                                   run_id="1", model_call_id="1")
    assert services.compaction_window(thread=thread) == (1, 100)
    services.thread_summary_record(actor=CHAT, thread=thread, from_sequence=1, to_sequence=100, content="s",
                                   run_id="2", model_call_id="2")
    assert services.compaction_window(thread=thread) == (1, 114)  # 115..120 are the last six

