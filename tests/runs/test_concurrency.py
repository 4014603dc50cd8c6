"""Concurrency on PostgreSQL with real threads (each with its own connection): a step delivered
twice at once runs once; concurrent admissions respect the tenant cap; run steps and notice drafts
on one case leave no failed run."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from cases import services as case_services
from cases.models import Case, Notice
from conversations.services import thread_create
from core.db import retry_on_deadlock
from runs import services
from runs.executor import run_step
from runs.models import AgentRun, Checkpoint, ModelCall, RunStatus, Step
from tests.factories import make_case
from tests.runs.conftest import FakeProvider, drive

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _in_threads(count: int, target) -> list:
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list = []

    def work(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = target(index)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


def test_the_same_step_delivered_twice_concurrently_runs_once(analyst, tenant, test_graphs, monkeypatch):
    def slow(request):
        time.sleep(0.5)  # the first delivery is mid-step while the second arrives
        return {"answer": "once"}

    provider = FakeProvider({"chat": slow})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_chat_loop", enqueue=False)

    outcomes = _in_threads(2, lambda i: run_step(run_id=run.pk, worker_id=f"worker-{i}", expected_sequence=1))
    actions = sorted(o.action for o in outcomes)
    assert actions in (["busy", "executed"], ["executed", "stale"], ["executed", "not_admitted"]), actions
    assert Step.objects.filter(run=run).count() == 1
    assert Checkpoint.objects.filter(run=run, sequence=1).count() == 1
    assert ModelCall.objects.filter(run=run).count() == 1 and len(provider.requests) == 1
    run.refresh_from_db()
    assert run.next_sequence == 2 and run.lease_owner is None


def test_eight_deliveries_of_one_step_at_once_make_one_step(analyst, tenant, test_graphs, fake_provider):
    run = services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 5}, enqueue=False)
    outcomes = _in_threads(8, lambda i: run_step(run_id=run.pk, worker_id=f"worker-{i}", expected_sequence=1))
    assert [o.action for o in outcomes].count("executed") == 1
    assert Step.objects.filter(run=run).count() == 1 and Checkpoint.objects.filter(run=run).count() == 2


def test_concurrent_admissions_respect_the_tenant_cap(analyst, tenant, test_graphs, settings, fake_provider):
    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 2
    runs = [services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 5}, enqueue=False)
            for _ in range(6)]
    outcomes = _in_threads(6, lambda i: run_step(run_id=runs[i].pk, worker_id=f"worker-{i}"))
    assert sorted(o.action for o in outcomes).count("executed") == 2
    assert AgentRun.objects.filter(status=RunStatus.RUNNING).count() == 2
    # FIFO holds under contention: the two oldest runs got the slots.
    running = set(AgentRun.objects.filter(status=RunStatus.RUNNING).values_list("pk", flat=True))
    assert running == {runs[0].pk, runs[1].pk}


def test_run_steps_and_notice_drafts_on_one_case_leave_no_failed_run(analyst, settings):
    """The deadlock mix: four case_analysis runs on one case (each in a thread of its own about the
    case, so none is deduplicated) are stepped by four threads at once while two more threads
    draft notices on the same case, as a person's request does (under retry_on_deadlock). Every
    run completes (0 failed), every draft is committed, nothing hangs."""
    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 8
    case = make_case(actor=analyst, title="Charged twice")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    runs = [services.run_start(actor=analyst, case=case, graph="case_analysis", enqueue=False,
                               thread=thread_create(actor=analyst, tenant=analyst.tenant, title=f"T{index}", case=case))
            for index in range(4)]
    drafts_per_thread = 5

    def step_or_draft(index: int):
        if index < len(runs):
            return drive(runs[index], worker_id=f"worker-{index}").status

        @retry_on_deadlock
        def draft(number: int):
            return case_services.notice_draft(actor=analyst, case=Case.objects.get(pk=case.pk),
                                              subject=f"Update {index}.{number}", body="We are looking into it.",
                                              recipient=case.complainant_email)

        return [draft(number).pk for number in range(drafts_per_thread)]

    outcomes = _in_threads(len(runs) + 2, step_or_draft)  # raises if any thread failed
    assert outcomes[:len(runs)] == [RunStatus.COMPLETED] * len(runs), outcomes
    assert AgentRun.objects.filter(status=RunStatus.FAILED).count() == 0
    assert all(len(drafted) == drafts_per_thread for drafted in outcomes[len(runs):])
    assert Notice.objects.filter(case=case, subject__startswith="Update ").count() == 2 * drafts_per_thread
