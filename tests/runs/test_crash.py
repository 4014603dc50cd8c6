"""Crash recovery with real processes on PostgreSQL.

A worker process (`manage.py analyze --inline`) is SIGKILLed right after a tool effect committed
and before its outcome was recorded (the settings-driven fault-injection pause). After its lease
expires, a real Celery worker (kicked by `manage.py reap_leases`) resumes the run from the last
checkpoint: the unknown-outcome tool call is reconciled through its idempotency key, every side
effect happened exactly once, and the run completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from cases import services as case_services
from cases.models import CaseEvent, Notice, Proposal
from runs.models import AgentRun, RunStatus, Step, ToolCall, ToolCallStatus

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra) -> dict:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": "filesystem://",
        "CELERY_BROKER_DIR": str(tmp_path / "broker"),
        "ARBITER_VAR_DIR": str(tmp_path / "var"),
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


def _wait_for(predicate, *, timeout: float, what: str, process=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if process is not None and process.poll() is not None:
            raise AssertionError(f"process exited ({process.returncode}) before {what}: {process.stdout.read()}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_worker_killed_mid_step_is_resumed_by_another_and_every_effect_happens_once(analyst, tmp_path):
    case = case_services.case_create(
        actor=analyst, tenant=analyst.tenant, title="Charged twice", product="Credit card",
        issue="Problem with a purchase shown on your statement", company="Example Bank, N.A.",
        complainant_email="consumer@example.org", tags="Older American",
        narrative=("I was charged {$1200.00} twice for the same purchase. I called XXXX times and the bank refused "
                   "to refund me. I am 72 years old and this is my pension."))
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    case.refresh_from_db()
    domain_before = (case.status, case.risk_level, case.version)
    marker = tmp_path / "paused"

    # Worker 1: pauses right after the first proposal is committed, before recording the outcome.
    first = subprocess.Popen(
        [sys.executable, "manage.py", "analyze", case.reference, "--tenant", analyst.tenant.slug, "--inline",
         "--user", analyst.username],
        cwd=ROOT, env=_env(tmp_path, ARBITER_RUN_LEASE_SECONDS="3",
                           ARBITER_FAULT_PAUSE_AFTER_EFFECT=f"proposal_create:{marker}"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(marker.exists, timeout=180, what="the fault-injection pause", process=first)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == -signal.SIGKILL

    run_id, key = marker.read_text().split()
    run = AgentRun.objects.get(pk=int(run_id))
    assert run.status == RunStatus.RUNNING and run.lease_owner.startswith("inline:")
    crashed_call = ToolCall.objects.get(idempotency_key=key)
    assert crashed_call.status == ToolCallStatus.STARTED  # outcome unknown: the effect happened, unrecorded
    assert Proposal.objects.filter(idempotency_key=key).count() == 1
    proposer_sequence = crashed_call.sequence
    assert not Step.objects.filter(run=run, sequence=proposer_sequence).exists()
    completed_before = Step.objects.filter(run=run).count()
    assert completed_before == proposer_sequence - 1

    # The lease lapses; the reaper re-enqueues the run and a real Celery worker picks it up.
    time.sleep(3.5)
    env = _env(tmp_path, ARBITER_RUN_LEASE_SECONDS="60")
    worker = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "celery"), "-A", "config", "worker", "--pool=solo", "--concurrency=1",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel=INFO"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        reap = subprocess.run([sys.executable, "manage.py", "reap_leases"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert reap.returncode == 0 and f"R{run.pk}" in reap.stdout, reap.stdout + reap.stderr

        def finished():
            run.refresh_from_db()
            return run.is_finished

        _wait_for(finished, timeout=240, what="the resumed run to finish", process=worker)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()

    assert run.status == RunStatus.COMPLETED, run.error
    steps = list(Step.objects.filter(run=run).order_by("sequence").values_list("sequence", "node", "worker_id"))
    assert [s[1] for s in steps] == ["triage", "evidence_analyst", "risk_assessor", "policy_checker", "adjudicator",
                                     "reflect", "proposer", "notice_drafter"]
    assert steps[proposer_sequence - 1][2] != steps[0][2]  # the proposer step was finished by the other worker
    # Every side effect happened exactly once.
    calls = ToolCall.objects.filter(run=run)
    assert set(calls.values_list("status", flat=True)) == {ToolCallStatus.SUCCEEDED}
    crashed_call.refresh_from_db()
    assert crashed_call.reconciled and crashed_call.step.sequence == proposer_sequence
    proposals = Proposal.objects.filter(run_id=str(run.pk))
    assert proposals.count() == calls.filter(tool="proposal_create").count() >= 2
    assert len(set(proposals.values_list("idempotency_key", flat=True))) == proposals.count()
    assert CaseEvent.objects.filter(case=case, event_type="proposal.created").count() == proposals.count()
    assert Notice.objects.filter(case=case).count() == 1
    assert CaseEvent.objects.filter(case=case, event_type="notice.drafted").count() == 1
    assert Notice.objects.get(case=case).status == "pending_approval"
    case.refresh_from_db()
    assert (case.status, case.risk_level, case.version) == domain_before
