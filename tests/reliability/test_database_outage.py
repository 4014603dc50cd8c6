"""The database unreachable for 20 s in the middle of runs (real Celery workers and beat whose
connections go through a TCP proxy the test cuts; the machine's PostgreSQL is never stopped):
runs make progress again within 30 s of its return, and finish, with every effect once.

Run with the production defaults for leases and reaping: recovering within 30 s is the executor's
job (step retries on database errors, heartbeat-timeout pickup in runs/executor.py, ADR 0010 §6)."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from runs import services as run_services
from runs.models import AgentRun, Step
from tests.reliability.conftest import TcpProxy, cluster_env, wait_until
from tests.reliability.scenario import (
    analysable_cases,
    assert_every_run_complete_and_every_effect_once,
    assert_ledger_verifies,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OUTAGE_SECONDS = 20
RECOVERY_TARGET_SECONDS = 30


def test_runs_make_progress_within_30s_after_a_20s_database_outage(analyst, tmp_path, redis_server,
                                                                    cluster_factory):
    db = connection.settings_dict
    proxy = TcpProxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))
    cases = analysable_cases(analyst, 6)
    # Production leases and reaping (120 s, 30 s): only heartbeats and the outbox relay are quickened.
    env = cluster_env(tmp_path, broker_url=redis_server.url, db_port=proxy.port,
                      ARBITER_RUN_LEASE_SECONDS=120, ARBITER_REAP_INTERVAL_SECONDS=30)
    cluster = cluster_factory(env)
    try:
        cluster.worker("w1", concurrency=2)
        cluster.beat()
        wait_until(lambda: " ready." in cluster.logs(), timeout=90, what="the worker to be ready")
        runs = [run_services.run_start(actor=analyst, case=case) for case in cases]
        run_ids = [r.pk for r in runs]
        wait_until(lambda: Step.objects.filter(run_id__in=run_ids).count() >= 6, timeout=90,
                   what="the runs to be under way")

        proxy.cut()
        time.sleep(OUTAGE_SECONDS)
        steps_before = Step.objects.filter(run_id__in=run_ids).count()
        proxy.restore()
        restored = time.monotonic()
        if not all(AgentRun.objects.get(pk=pk).is_finished for pk in run_ids):
            wait_until(lambda: Step.objects.filter(run_id__in=run_ids).count() > steps_before
                       or all(AgentRun.objects.get(pk=pk).is_finished for pk in run_ids),
                       timeout=RECOVERY_TARGET_SECONDS, what="a step committed after the database came back")
        recovery = time.monotonic() - restored
        print(f"first progress {recovery:.1f}s after the database came back")
        wait_until(lambda: all(AgentRun.objects.get(pk=pk).is_finished for pk in run_ids), timeout=120,
                   what="every run to finish")
    finally:
        cluster.stop()
        proxy.close()
    assert_every_run_complete_and_every_effect_once(runs)
    assert_ledger_verifies()
