"""Workers SIGKILLed at random moments during 20 analysis runs on 2 real Celery workers (throwaway
Redis, PostgreSQL): each kill takes the whole worker (main process and pool) down, a new one takes
its place; every run completes and every effect happens once; the ledger verifies."""

from __future__ import annotations

import random
import time

import pytest

from runs import services as run_services
from runs.models import AgentRun
from tests.reliability.conftest import cluster_env, wait_until
from tests.reliability.scenario import (
    analysable_cases,
    assert_every_run_complete_and_every_effect_once,
    assert_ledger_verifies,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNS = 20
KILLS = 4


def test_runs_survive_workers_killed_at_random_moments(analyst, tmp_path, redis_server, cluster_factory):
    seed = random.randrange(1_000_000)
    chance = random.Random(seed)
    cases = analysable_cases(analyst, RUNS)
    cluster = cluster_factory(cluster_env(tmp_path, broker_url=redis_server.url))
    cluster.worker("w1")
    cluster.worker("w2")
    cluster.beat()
    wait_until(lambda: cluster.logs().count(" ready.") >= 2, timeout=90, what="both workers to be ready")
    runs = [run_services.run_start(actor=analyst, case=case) for case in cases]  # published on commit

    generation = 2
    for _ in range(KILLS):
        time.sleep(chance.uniform(1.0, 5.0))
        victim = chance.choice([name for name in cluster.processes if name.startswith("w")])
        cluster.kill(victim)  # SIGKILL to the whole process group: no clean-up of any kind
        generation += 1
        cluster.worker(f"w{generation}")

    try:
        wait_until(lambda: all(AgentRun.objects.get(pk=r.pk).is_finished for r in runs), timeout=200,
                   what=f"all {RUNS} runs to finish (random seed {seed})")
    except AssertionError:
        raise AssertionError(cluster.logs()) from None
    finally:
        cluster.stop()
    assert_every_run_complete_and_every_effect_once(runs)
    assert_ledger_verifies()
