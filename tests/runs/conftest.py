"""Fixtures for the runs tests: an observable enqueue, a scripted fake provider, a run driver."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from core.tokens import count_message_tokens, count_tokens
from runs.models import AgentRun, RunStatus
from runs.providers import ModelResponse


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    """Every step the code enqueues, as (run_id, expected_sequence, countdown); nothing reaches a broker."""
    calls: list[tuple[int, int | None, int]] = []

    def record(run_id, *, expected_sequence=None, countdown=0):
        calls.append((run_id, expected_sequence, countdown))

    monkeypatch.setattr("runs.tasks.enqueue_step", record)
    return calls


def _default_answers(agent: str, context: dict) -> dict:
    case = context.get("case") or {}
    evidence_ids = [e["id"] for e in context.get("evidence") or []]
    if agent == "triage":
        return {"product": case.get("product") or "Credit card", "issue": case.get("issue") or "Billing",
                "respondent": case.get("company") or "Example Bank", "requested_remedy": "refund",
                "confidence": 0.9, "evidence_refs": evidence_ids[:1]}
    if agent == "evidence_analyst":
        return {"summary": "The consumer was charged twice.", "evidence_refs": evidence_ids,
                "key_points": [{"text": "charged twice", "evidence_id": i} for i in evidence_ids[:1]]}
    if agent == "risk_assessor":
        return {"risk_level": "medium", "rationale": "Money at stake.", "signals": [], "evidence_refs": evidence_ids,
                "confidence": 0.8}
    if agent == "policy_checker":
        return {"rules": [{"code": "ACK-15", "applies": True, "reason": "received", "deadline": None}],
                "notice_due": case.get("status") in ("triaged", "under_review"), "notice_reason": "ACK-15"}
    if agent == "adjudicator":
        return {"summary": "Billing dispute, medium risk.", "risk_level": "medium",
                "recommended_transition": {"new": "triage", "triaged": "start_review"}.get(case.get("status")),
                "disputes": [], "confidence": 0.8}
    if agent == "reflect":
        return {"replan": False, "reason": "fine", "revisit": []}
    if agent == "notice_drafter":
        return {"subject": "We received your complaint", "body": "Dear consumer, we are reviewing your complaint."}
    if agent == "chat":
        return {"answer": "ok"}
    raise AssertionError(f"no fake answer for {agent}")


class FakeProvider:
    """A provider at the model boundary: answers per agent from `answers` (a dict, a callable
    taking the request, or an exception to raise), else from simple defaults."""

    name = "fake"
    model = "fake-1"

    def __init__(self, answers: dict[str, object] | None = None):
        self.answers = dict(answers or {})
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        answer = self.answers.get(request.agent)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, list):  # a script: one entry per call
            answer = answer.pop(0)
            if isinstance(answer, Exception):
                raise answer
        data = answer(request) if callable(answer) else answer
        if data is None:
            data = _default_answers(request.agent, request.context)
        raw = json.dumps(data)
        return ModelResponse(output=request.output_schema.model_validate(data), raw=raw, provider=self.name,
                             model=self.model, prompt_tokens=count_message_tokens(request.messages),
                             completion_tokens=count_tokens(raw), latency_ms=1)


@pytest.fixture
def fake_provider(monkeypatch) -> FakeProvider:
    provider = FakeProvider()
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    return provider


def drive(run: AgentRun, *, worker_id: str = "test-worker", max_steps: int = 100,
          on_step: Callable | None = None) -> AgentRun:
    """Run steps in this process until the run stops (what a worker would do, minus the broker)."""
    from runs.executor import run_step

    for _ in range(max_steps):
        outcome = run_step(run_id=run.pk, worker_id=worker_id, enqueue=False)
        if on_step is not None:
            on_step(outcome)
        run.refresh_from_db()
        if run.status != RunStatus.RUNNING and outcome.action != "retry":
            if run.status == RunStatus.QUEUED and outcome.action == "not_admitted":
                break
            if run.status in (*RunStatus.terminal(), RunStatus.WAITING) or outcome.action == "not_admitted":
                break
    return run


@pytest.fixture
def test_graphs(monkeypatch):
    """Register the graphs of tests/runs/graphs.py under their names for this test."""
    from runs.graph import GRAPHS

    for name, attribute in {"test_loop": "LOOP", "test_wait": "WAIT", "test_crash": "CRASH", "test_chat": "CHAT",
                            "test_tools": "TOOLS", "test_chat_loop": "CHAT_LOOP",
                            "test_commit_refused": "COMMIT_REFUSED", "test_append": "APPEND"}.items():
        monkeypatch.setitem(GRAPHS, name, f"tests.runs.graphs:{attribute}")
