"""Beat down, a worker SIGKILLed mid-step: the run resumes through the other worker (whose
heartbeat thread reaps expired leases) in under 20 s with the default windows, completes, and
every effect happens once (real Celery workers on a throwaway Redis, PostgreSQL)."""

from __future__ import annotations

import time

import pytest

from runs import services as run_services
from runs.models import AgentRun, Step, ToolCall
from tests.reliability.conftest import cluster_env, wait_until
from tests.reliability.scenario import (
    analysable_cases,
    assert_every_run_complete_and_every_effect_once,
    assert_ledger_verifies,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_run_resumes_under_20_seconds_after_its_worker_is_killed_with_beat_down(analyst, tmp_path, redis_server,
                                                                                 cluster_factory):
    marker = tmp_path / "paused"
    # The default windows (heartbeat 2 s, timeout 8 s, reap every 3 s), not the harness's short ones.
    defaults = {"ARBITER_RUN_LEASE_SECONDS": 120, "ARBITER_REAP_INTERVAL_SECONDS": 3,
                "ARBITER_WORKER_HEARTBEAT_SECONDS": 10, "ARBITER_RUN_HEARTBEAT_SECONDS": 2,
                "ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS": 8}
    paused = cluster_factory(cluster_env(tmp_path, broker_url=redis_server.url, **defaults,
                                         ARBITER_FAULT_PAUSE_AFTER_EFFECT=f"proposal_create:{marker}"))
    survivor = cluster_factory(cluster_env(tmp_path, broker_url=redis_server.url, **defaults))
    [case] = analysable_cases(analyst, 1)
    paused.worker("w1")  # no beat anywhere in this test
    wait_until(lambda: "ready." in (tmp_path / "log" / "w1.log").read_text(), timeout=90, what="w1 to be ready")
    run = run_services.run_start(actor=analyst, case=case)
    wait_until(marker.exists, timeout=120, what="w1 to pause right after a proposal's effect")
    run_id, key = marker.read_text().split()
    assert int(run_id) == run.pk
    sequence = ToolCall.objects.get(idempotency_key=key).sequence

    survivor.worker("w2")
    wait_until(lambda: "ready." in (tmp_path / "log" / "w2.log").read_text(), timeout=90, what="w2 to be ready")
    paused.kill("w1")  # the whole process group: main process, pool and its heartbeat threads
    killed_at = time.monotonic()
    try:
        wait_until(lambda: Step.objects.filter(run_id=run.pk, sequence=sequence).exists(), timeout=60,
                   what="the interrupted step to be done by w2", poll=0.2)
        resumed_after = time.monotonic() - killed_at
        wait_until(lambda: AgentRun.objects.get(pk=run.pk).is_finished, timeout=120, what="the run to finish")
    except AssertionError:
        raise AssertionError(survivor.logs()) from None
    print(f"resumed {resumed_after:.1f} s after the SIGKILL")
    assert resumed_after < 20, f"resumed only {resumed_after:.1f} s after the SIGKILL"
    assert "reaper re-enqueued runs" in (tmp_path / "log" / "w2.log").read_text()
    assert_every_run_complete_and_every_effect_once([run])
    assert_ledger_verifies()
