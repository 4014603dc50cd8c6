"""Two messages posted at once to one thread, on PostgreSQL with real threads: both are stored
with distinct sequences, both answered, and the replies come in the order of the questions, even
with two workers racing over both runs.

Each thread has its own database connection (Django opens one per thread) and closes it at the
end; the rows are committed first, hence transaction=True."""

import threading

import pytest
from django.db import connection

from conversations import services
from conversations.models import Message
from conversations.selectors import thread_pending_replies
from runs.executor import run_step
from runs.models import AgentRun, RunStatus

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def race(count: int, work) -> list:
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def worker(index):
        try:
            barrier.wait(timeout=30)
            results[index] = work(index)
        except Exception as exc:  # the test inspects what each thread got
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung (deadlock?)"
    return results


def test_two_posts_at_once_are_both_answered_in_order(thread, analyst, analyst_b, enqueued):
    people = [analyst, analyst_b]
    texts = ["What is the status of this case?", "What is the risk of this case?"]
    posted = race(2, lambda i: services.message_post(actor=people[i], thread=thread, content=texts[i]))
    assert not any(isinstance(r, Exception) for r in posted), posted
    by_sequence = sorted(posted, key=lambda m: m.sequence)
    assert [m.sequence for m in by_sequence] == [1, 2]
    thread.refresh_from_db()
    assert thread.last_sequence == 2
    # Each message's run was created with it; the earlier message has the earlier run.
    run_ids = [int(m.reply_run_id) for m in by_sequence]
    assert run_ids == sorted(run_ids)
    assert {run_id for run_id, _ in enqueued} == set(run_ids)  # both enqueued once committed
    pending = thread_pending_replies(thread=thread)
    assert [(p.message.sequence, p.run_status) for p in pending] == [(1, "queued"), (2, "queued")]

    # Two workers race over both runs, the later one first: admission keeps them in order.
    def worker(index):
        order = list(reversed(run_ids)) if index == 0 else run_ids
        for _ in range(200):
            for run_id in order:
                run_step(run_id=run_id, worker_id=f"worker-{index}", enqueue=False)
            if all(s in RunStatus.terminal() for s in AgentRun.objects.filter(pk__in=run_ids)
                   .values_list("status", flat=True)):
                return "done"
        return "gave up"

    assert race(2, worker) == ["done", "done"]
    assert list(AgentRun.objects.filter(pk__in=run_ids).order_by("pk").values_list("status", flat=True)) == [
        RunStatus.COMPLETED, RunStatus.COMPLETED]
    first, second = by_sequence
    reply_first = Message.objects.get(in_reply_to=first)
    reply_second = Message.objects.get(in_reply_to=second)
    assert reply_first.sequence < reply_second.sequence
    assert reply_first.created_at <= reply_second.created_at
    assert (reply_first.run_id, reply_second.run_id) == (first.reply_run_id, second.reply_run_id)
    assert Message.objects.filter(thread=thread).count() == 4
    assert sorted(Message.objects.filter(thread=thread).values_list("sequence", flat=True)) == [1, 2, 3, 4]
    assert thread_pending_replies(thread=thread) == []
    # The second run started only after the first had finished.
    runs = {r.pk: r for r in AgentRun.objects.filter(pk__in=run_ids)}
    assert runs[run_ids[1]].started_at >= runs[run_ids[0]].finished_at


def test_many_posts_at_once_get_distinct_consecutive_sequences(thread, analyst, analyst_b, supervisor):
    people = [analyst, analyst_b, supervisor]
    posted = race(6, lambda i: services.message_post(actor=people[i % 3], thread=thread, content=f"Question {i}"))
    assert not any(isinstance(r, Exception) for r in posted), posted
    assert sorted(m.sequence for m in posted) == [1, 2, 3, 4, 5, 6]
    assert AgentRun.objects.filter(thread=thread, graph="chat").count() == 6
