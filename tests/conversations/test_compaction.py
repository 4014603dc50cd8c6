"""Compaction: older turns folded into a ThreadSummary by a run, with its model call recorded; the
originals stay stored and visible."""

import pytest

from audit.models import AuditEvent
from conversations import services
from conversations.context import thread_context_build
from conversations.models import Message, Thread, ThreadSummary
from conversations.selectors import message_list_for_user
from core.actors import Actor
from core.errors import Forbidden, NotAllowed, NotFound
from runs.models import AgentRun, ModelCall, RunStatus
from tests.conversations.conftest import drive, fill_thread, post_and_answer
from tests.helpers import assert_nothing_changed


def rows():
    return {"runs": AgentRun.objects.count(), "summaries": ThreadSummary.objects.count(),
            "threads": sorted(Thread.objects.values_list("pk", "last_sequence"))}


def test_compaction_writes_a_summary_with_its_model_call_and_keeps_the_originals(thread, analyst, case):
    fill_thread(thread, 60, author=analyst)
    run = services.thread_compact(actor=analyst, thread=thread)
    assert (run.graph, run.thread_id, run.status) == ("thread_compaction", thread.pk, RunStatus.QUEUED)
    assert run.input == {"thread_id": thread.pk, "from_sequence": 1, "to_sequence": 54}
    started = AuditEvent.objects.get(action="conversations.thread.compaction_started")
    assert (started.run_id, started.actor_id, started.stream) == (str(run.pk), f"user:{analyst.pk}", f"case:{case.pk}")

    run = drive(run.pk)
    assert run.status == RunStatus.COMPLETED
    summary = ThreadSummary.objects.get(thread=thread)
    assert (summary.from_sequence, summary.to_sequence, summary.run_id) == (1, 54, str(run.pk))
    call = ModelCall.objects.get(pk=int(summary.model_call_id))
    assert (call.run_id, call.agent, call.output_schema) == (run.pk, "thread_summarizer", "ThreadSummaryOutput")
    assert call.validated_output["summary"] == summary.content
    assert [t["sequence"] for t in call.context["thread"]["recent"]] == list(range(1, 55))
    assert call.source_refs["thread"]["to_sequence"] == 54
    recorded = AuditEvent.objects.get(action="conversations.summary.recorded")
    assert (recorded.run_id, recorded.payload["model_call_id"]) == (str(run.pk), str(call.pk))

    # The originals are all still stored and visible; contexts now use the summary + recent turns.
    assert Message.objects.filter(thread=thread).count() == 60
    assert [m.sequence for m in message_list_for_user(user=analyst, thread=thread)] == list(range(1, 61))
    context = thread_context_build(thread=thread)
    assert context.summary_id == summary.pk
    assert [t.sequence for t in context.turns] == list(range(55, 61))


def test_a_second_trigger_returns_the_unfinished_compaction_run(thread, analyst, supervisor):
    fill_thread(thread, 30, author=analyst)
    first = services.thread_compact(actor=analyst, thread=thread)
    with assert_nothing_changed(extra={"rows": rows}):
        again = services.thread_compact(actor=supervisor, thread=thread)
    assert again.pk == first.pk


def test_nothing_to_compact_is_refused_and_changes_nothing(thread, analyst, case):
    fill_thread(thread, 6, author=analyst)
    with assert_nothing_changed(case, extra={"rows": rows}), pytest.raises(NotAllowed) as caught:
        services.thread_compact(actor=analyst, thread=thread)
    assert "last 6 messages" in caught.value.message


@pytest.mark.parametrize("who,error", [("auditor", Forbidden), ("outsider", NotFound), ("agent", Forbidden)])
def test_compaction_refusals_change_nothing(request, thread, analyst, case, who, error):
    fill_thread(thread, 30, author=analyst)
    actor = request.getfixturevalue(who)
    with assert_nothing_changed(case, extra={"rows": rows}), pytest.raises(error):
        services.thread_compact(actor=actor, thread=thread)


def test_the_summariser_input_is_capped_and_the_next_compaction_continues(thread, analyst, settings):
    settings.CONVERSATIONS_COMPACTION_INPUT_TOKENS = 500
    fill_thread(thread, 200, author=analyst, words=20)
    first = drive(services.thread_compact(actor=analyst, thread=thread).pk)
    summary = ThreadSummary.objects.get(run_id=str(first.pk))
    assert 1 < summary.to_sequence < 194  # only what fit in 500 tokens
    second = drive(services.thread_compact(actor=analyst, thread=thread).pk)
    follow_up = ThreadSummary.objects.get(run_id=str(second.pk))
    assert (follow_up.from_sequence, follow_up.previous_id) == (1, summary.pk)
    assert follow_up.to_sequence > summary.to_sequence
    call = ModelCall.objects.get(pk=int(follow_up.model_call_id))
    assert call.context["thread"]["summary"] == summary.content  # the earlier summary is folded in
    assert call.context["thread"]["recent"][0]["sequence"] == summary.to_sequence + 1


def test_a_chat_answer_triggers_compaction_when_the_thread_outgrows_its_budget(thread, analyst):
    Thread.objects.filter(pk=thread.pk).update(token_budget=400)
    thread.refresh_from_db()
    fill_thread(thread, 120, author=analyst, words=20)
    _question, reply, run = post_and_answer(thread, analyst, "What is the status?")
    assert run.status == RunStatus.COMPLETED and reply is not None
    assert reply.metadata["thread_context"]["needs_compaction"] is True
    compaction = AgentRun.objects.get(thread=thread, graph="thread_compaction")
    assert compaction.started_by == "system:thread-compaction"
    assert compaction.status == RunStatus.QUEUED
    drive(compaction.pk)
    summary = ThreadSummary.objects.get(thread=thread)
    # The next answer's context: the summary plus the recent turns, within the thread's budget.
    _q2, _r2, run2 = post_and_answer(thread, analyst, "And the risk?")
    call = ModelCall.objects.get(run=run2, agent="chat")
    assert call.context["thread"]["summary"]
    assert call.source_refs["thread"]["summary_id"] == summary.pk
    assert call.source_refs["thread"]["tokens"] <= 400
    assert all(t["sequence"] > summary.to_sequence for t in call.context["thread"]["recent"])


def test_a_system_actor_may_compact_but_an_agent_may_not(thread, analyst):
    fill_thread(thread, 30, author=analyst)
    with assert_nothing_changed(extra={"runs": AgentRun.objects.count, "summaries": ThreadSummary.objects.count}), \
            pytest.raises(Forbidden):
        services.thread_compact(actor=Actor.agent("answer", "1"), thread=thread)
    run = services.thread_compact(actor=Actor.system("thread-compaction"), thread=thread)
    assert run.started_by == "system:thread-compaction"
