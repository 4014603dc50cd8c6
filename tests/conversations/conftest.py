"""Fixtures for conversation tests: a thread about the persona case, and a fast way to fill a
thread with thousands of messages (bulk_create, bypassing the services on purpose: the tests
that use it are about reading long threads, not about writing them)."""

import hashlib

import pytest

from conversations import services
from conversations.models import Message, MessageRole, Thread


@pytest.fixture
def thread(analyst, case):
    return services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Refund dispute")


def fill_thread(thread: Thread, count: int, *, author, start: int = 1, words: int = 12) -> list[Message]:
    """Append `count` alternating user/assistant messages starting at sequence `start`."""
    rows = []
    for sequence in range(start, start + count):
        is_user = sequence % 2 == 1
        content = f"message {sequence}: " + " ".join(f"word{sequence % 97}x{i}" for i in range(words))
        rows.append(Message(
            tenant_id=thread.tenant_id, thread=thread, sequence=sequence,
            role=MessageRole.USER if is_user else MessageRole.ASSISTANT,
            author_type="user" if is_user else "agent",
            author_id=f"user:{author.pk}" if is_user else "agent:chat@1",
            author_user=author if is_user else None, content=content,
            content_sha256=hashlib.sha256(content.encode()).hexdigest()))
    created = Message.objects.bulk_create(rows, batch_size=1000)
    # Thread is not append-only; keep its counter in step with what was inserted.
    Thread.objects.filter(pk=thread.pk).update(last_sequence=start + count - 1)
    thread.refresh_from_db()
    return created


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    """Steps the code enqueues, as (run_id, expected_sequence); nothing reaches a broker. Tests
    drive runs themselves through the executor (drive), as a worker would."""
    calls: list[tuple[int, int | None]] = []

    def record(run_id, *, expected_sequence=None, countdown=0):
        calls.append((run_id, expected_sequence))

    monkeypatch.setattr("runs.tasks.enqueue_step", record)
    return calls


def drive(run_id: int, *, worker_id: str = "test-worker", max_steps: int = 20):
    """Execute a run's steps through runs.executor.run_step until it stops; returns the run."""
    from runs.executor import run_step
    from runs.models import AgentRun, RunStatus

    for _ in range(max_steps):
        outcome = run_step(run_id=run_id, worker_id=worker_id, enqueue=False)
        if outcome.action in ("not_admitted", "finished", "missing") or outcome.status != RunStatus.RUNNING:
            break
    return AgentRun.objects.get(pk=run_id)


def post_and_answer(thread: Thread, author, text: str):
    """Post through the service, then run the chat run that answers it. Returns (question, reply, run)."""
    question = services.message_post(actor=author, thread=thread, content=text)
    run = drive(int(question.reply_run_id))
    reply = Message.objects.filter(in_reply_to=question).first()
    return question, reply, run
