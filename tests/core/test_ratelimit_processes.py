"""Two real processes share one limit: each asks the run-start throttle (counted in the cache) for
more than the whole limit at the same moment, and together they admit exactly the limit — on
Redis (db 14 of 127.0.0.1:6379) and on the database cache (PostgreSQL)."""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/14"
LIMIT = 25
ATTEMPTS_PER_PROCESS = 40

# Runs in each child: say ready, wait for the word, then ask the throttle ATTEMPTS times.
CHILD = """
import json, os, sys, time
import django
django.setup()
from types import SimpleNamespace
from django.test import override_settings
from core.api_base import RunStartThrottle

user = SimpleNamespace(pk=os.environ["TEST_USER_ID"], is_authenticated=True)
request = SimpleNamespace(method="POST", user=user)
with override_settings(ARBITER_API_THROTTLE_RUN_START=os.environ["TEST_RATE"]):
    print("ready", flush=True)
    sys.stdin.readline()  # the parent says go once both children are ready
    admitted = 0
    for _ in range(int(os.environ["TEST_ATTEMPTS"])):
        admitted += RunStartThrottle().allow_request(request, None)
        time.sleep(0.005)  # spread out, so the two children's requests interleave
print(json.dumps({"admitted": admitted}))
"""


def _redis_reachable() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def _wait_clear_of_a_window_boundary(seconds_per_window: int) -> None:
    into_window = time.time() % seconds_per_window
    if into_window > seconds_per_window - 30:
        time.sleep(seconds_per_window - into_window + 1)


def _run_two(env: dict) -> list[int]:
    _wait_clear_of_a_window_boundary(3600)
    env = {**os.environ, **env, "DJANGO_SETTINGS_MODULE": "config.settings_test", "TEST_RATE": f"{LIMIT}/hour",
           "TEST_ATTEMPTS": str(ATTEMPTS_PER_PROCESS), "TEST_USER_ID": f"shared-{uuid.uuid4().hex}"}
    children = [subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for child in children:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()[-2000:]
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    admitted = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err[-2000:]
        admitted.append(json.loads(out.strip().splitlines()[-1])["admitted"])
    return admitted


@pytest.mark.slow
def test_two_processes_on_redis_admit_the_limit_together():
    if not _redis_reachable():
        pytest.skip(f"needs Redis at {REDIS_URL}")
    admitted = _run_two({"CACHE_URL": REDIS_URL})
    assert sum(admitted) == LIMIT, admitted
    assert all(count > 0 for count in admitted), admitted  # both really competed for the same counter


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_processes_on_the_database_cache_admit_the_limit_together():
    settings_dict = connection.settings_dict
    url = (f"postgres://{settings_dict['USER']}@{settings_dict['HOST'] or '127.0.0.1'}:"
           f"{settings_dict['PORT'] or 5432}/{settings_dict['NAME']}")  # the test database (migrated)
    admitted = _run_two({"CACHE_URL": "", "DATABASE_URL": url})
    assert sum(admitted) == LIMIT, admitted
    assert all(count > 0 for count in admitted), admitted
