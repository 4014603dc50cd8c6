"""Domain metrics move where the work happens: runs started and finished per graph,
step latency, model tokens, tool latency, approvals, dispatches and lease expiries."""

import pytest
from prometheus_client import REGISTRY

from cases import services as case_services
from runs import services
from runs.models import AgentRun, RunStatus
from runs.tasks import reap_expired_leases_task, run_step_task

pytestmark = pytest.mark.django_db


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_an_analysis_run_counts_its_start_steps_tokens_tools_and_finish(analyst, case, monkeypatch,
                                                                       django_capture_on_commit_callbacks):
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda *args, **kwargs: None)  # this test drives the steps
    before = {"started": value("arbiter_runs_started_total", graph="case_analysis"),
              "completed": value("arbiter_runs_finished_total", graph="case_analysis", status="completed"),
              "steps": value("arbiter_run_step_seconds_count", graph="case_analysis", outcome="executed"),
              "prompt": value("arbiter_model_tokens_total", agent="triage", kind="prompt"),
              "tools": value("arbiter_tool_seconds_count", tool="proposal_create", outcome="succeeded")}
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(actor=analyst, case=case)
    for _ in range(20):
        run_step_task.apply(kwargs={"run_id": run.pk})  # the worker's task, with its prerun/postrun signals
        run.refresh_from_db()
        if run.status != RunStatus.RUNNING and run.status != RunStatus.QUEUED:
            break
    assert run.status == RunStatus.COMPLETED, run.error

    assert value("arbiter_runs_started_total", graph="case_analysis") == before["started"] + 1
    assert value("arbiter_runs_finished_total", graph="case_analysis", status="completed") == before["completed"] + 1
    assert value("arbiter_run_step_seconds_count", graph="case_analysis", outcome="executed") == (
        before["steps"] + run.steps.count())
    assert value("arbiter_model_tokens_total", agent="triage", kind="prompt") > before["prompt"]
    assert value("arbiter_tool_seconds_count", tool="proposal_create", outcome="succeeded") > before["tools"]


def test_approvals_are_counted_once_committed(analyst, supervisor, agent, case, django_capture_on_commit_callbacks):
    proposal = case_services.proposal_create(actor=agent, case=case, kind="risk_level",
                                             payload={"risk_level": "high"}, rationale="Money at stake.")
    before = value("arbiter_approvals_total", kind="proposal", decision="approved")
    with django_capture_on_commit_callbacks(execute=True):
        case_services.proposal_approve(actor=supervisor, proposal=proposal)
    assert value("arbiter_approvals_total", kind="proposal", decision="approved") == before + 1


def test_reaped_leases_are_counted(analyst, case):
    from datetime import timedelta

    from django.utils import timezone

    run = services.run_start(actor=analyst, case=case, enqueue=False)
    AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, lease_owner="gone",
                                              lease_expires_at=timezone.now() - timedelta(minutes=5))
    before = value("arbiter_run_lease_expiries_total")
    assert reap_expired_leases_task.apply().get() == 1
    assert value("arbiter_run_lease_expiries_total") == before + 1
