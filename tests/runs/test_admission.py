"""Admission: the tenant cap, FIFO order with queue positions, and per-thread ordering."""

from __future__ import annotations

import pytest

from conversations.services import thread_create
from runs import services
from runs.executor import admission_order, run_step
from runs.models import AgentRun, RunStatus
from runs.selectors import run_queue_position, thread_pending_runs
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def start(analyst, tenant, test_graphs):
    def make(**kwargs):
        kwargs.setdefault("graph", "test_loop")
        kwargs.setdefault("input", {"n": 2})
        return services.run_start(actor=analyst, tenant=tenant, enqueue=False, **kwargs)
    return make


def test_the_tenant_cap_holds_extra_runs_queued_in_fifo_order(start, settings, enqueued, outsider,
                                                               django_capture_on_commit_callbacks):
    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 2
    runs = [start() for _ in range(4)]
    assert [run_queue_position(run=r) for r in runs] == [1, 2, 3, 4]
    assert [run_step(run_id=r.pk, worker_id="w").action for r in runs] == [
        "executed", "executed", "not_admitted", "not_admitted"]
    for r in runs:
        r.refresh_from_db()
    assert [r.status for r in runs] == ["running", "running", "queued", "queued"]
    assert [run_queue_position(run=r) for r in runs] == [None, None, 1, 2]
    # Another tenant's queue is independent.
    other = services.run_start(actor=outsider, tenant=outsider.tenant, graph="test_loop", enqueue=False)
    assert run_step(run_id=other.pk, worker_id="w").action == "executed"

    # The first run finishes: its slot goes to the oldest queued run, which is enqueued on commit.
    with django_capture_on_commit_callbacks(execute=True):
        run_step(run_id=runs[0].pk, worker_id="w")
    assert (runs[2].pk, None, 0) in enqueued and (runs[3].pk, None, 0) not in enqueued
    # FIFO: the newer run cannot jump the queue even with a slot free.
    assert run_step(run_id=runs[3].pk, worker_id="w").action == "not_admitted"
    assert run_step(run_id=runs[2].pk, worker_id="w").action == "executed"
    assert AgentRun.objects.filter(tenant=runs[0].tenant, status=RunStatus.RUNNING).count() == 2


def test_admission_order_skips_thread_blocked_runs(start, analyst, tenant, case, settings):
    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 3
    thread = thread_create(actor=analyst, tenant=tenant, title="Questions", case=case)
    first = start(thread=thread, case=case)
    second = start(thread=thread, case=case)
    unrelated = start()
    assert admission_order(tenant.pk) == [first.pk, unrelated.pk]
    assert [r.pk for r in thread_pending_runs(thread_id=thread.pk)] == [first.pk, second.pk]


def test_a_threads_runs_start_in_order(start, analyst, tenant, case, enqueued, django_capture_on_commit_callbacks):
    thread = thread_create(actor=analyst, tenant=tenant, title="Questions", case=case)
    first = start(thread=thread, case=case, graph="test_wait")
    second = start(thread=thread, case=case)
    assert run_step(run_id=second.pk, worker_id="w").action == "not_admitted"
    first = drive(first)
    assert first.status == RunStatus.WAITING  # unfinished: still blocks the thread
    assert run_step(run_id=second.pk, worker_id="w").action == "not_admitted"
    services.run_resume(actor=analyst, run=first, enqueue=False)
    with django_capture_on_commit_callbacks(execute=True):
        drive(first)
    assert (second.pk, None, 0) in enqueued
    second = drive(second)
    assert second.status == RunStatus.COMPLETED
    assert second.started_at > first.finished_at


def test_queue_facts_say_why_a_run_waits(start, settings, outsider):
    from runs.selectors import run_queue_facts

    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 1
    first, second = start(), start()
    assert run_queue_facts(run=second) == {"position": 2, "cap": 1, "running": 0, "cap_reached": False}
    run_step(run_id=first.pk, worker_id="w")
    first.refresh_from_db()
    second.refresh_from_db()
    assert run_queue_facts(run=second) == {"position": 1, "cap": 1, "running": 1, "cap_reached": True}
    assert run_queue_facts(run=first) == {"position": None, "cap": 1, "running": None, "cap_reached": False}
    # Another tenant's running runs do not count against this one.
    other = services.run_start(actor=outsider, tenant=outsider.tenant, graph="test_loop", enqueue=False)
    assert run_queue_facts(run=other)["running"] == 0


def test_the_worker_that_admits_a_run_holds_its_lease_and_does_not_claim_it_again(start):
    run = start(input={"n": 3})
    outcome = run_step(run_id=run.pk, worker_id="w1", enqueue=False, keep_lease=True)
    assert (outcome.action, outcome.sequence) == ("executed", 1)
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.next_sequence) == (RunStatus.RUNNING, "w1", 2)
    # Nobody else can claim it meanwhile: the lease is live.
    assert run_step(run_id=run.pk, worker_id="w2", enqueue=False).action == "busy"


def test_a_run_admitted_again_after_failing_still_settles_a_dead_attempts_tool_calls(analyst, case, test_graphs,
                                                                                      fake_provider):
    """Only a first admission skips the reconciliation: a resumed run may have been attempted."""
    from django.utils import timezone

    from runs.models import EffectType, ToolCall, ToolCallStatus

    run = services.run_start(actor=analyst, case=case, graph="test_tools", input={"calls": []}, enqueue=False)
    # A worker admitted it and died in step 1 after starting a tool call; the run then failed at a
    # step boundary (a budget) without running step 1 again, and a person resumes it.
    key = f"{run.pk}:1:draft"
    ToolCall.objects.create(run=run, sequence=1, tool="notice_draft", action="draft", effect_type=EffectType.DRAFT,
                            idempotency_key=key, arguments={}, actor_id="agent:tools@1", policy_decision="allowed",
                            status=ToolCallStatus.STARTED, started_at=timezone.now())
    AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, started_at=timezone.now(), error="budget",
                                              current_node="tools")
    services.run_resume(actor=analyst, run=AgentRun.objects.get(pk=run.pk), enqueue=False)
    assert run_step(run_id=run.pk, worker_id="w2", enqueue=False, keep_lease=True).action == "executed"
    abandoned = ToolCall.objects.get(idempotency_key=key)
    assert (abandoned.status, abandoned.error_code, abandoned.step.sequence) == ("failed", "abandoned", 1)
