"""`make bench-load` keeps working: a tiny run (3 people for 15 s) starts gunicorn on a seeded
throwaway PostgreSQL database, drives it with the locust mix, prints a row per request kind with
no failure, and drops its database and flushes its broker database at the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
import redis
from django.db import connection

from tests.reliability.conftest import RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.django_db]

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^(?P<name>\S.{0,33}?)\s+(?P<count>\d+)\s+(?P<fails>\d+)\s+\d+\s+\d+\s+\d+\s+\d+\s+[\d.]+$")


def test_a_tiny_load_run_prints_every_request_kind_without_failures_and_cleans_up(tmp_path):
    db = connection.settings_dict
    server = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    name = f"arbiter_bench_load_test_{uuid.uuid4().hex[:8]}"
    broker = RedisServer(tmp_path / "redis")
    broker.start()
    try:
        env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
        result = subprocess.run([sys.executable, "bench/load.py", "--users", "3", "--spawn-rate", "3",
                                 "--minutes", "0.25", "--database-url", f"{server}/{name}",
                                 "--broker-url", broker.url, "--var-dir", str(tmp_path / "var")],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        rows = {m["name"].strip(): (int(m["count"]), int(m["fails"]))
                for m in map(ROW.match, result.stdout.splitlines()) if m}
        assert {"login", "login page", "/api/v1/cases/", "Aggregated"} <= set(rows), result.stdout
        assert rows["Aggregated"][0] > 10 and all(fails == 0 for _count, fails in rows.values()), result.stdout
        assert "load average before" in result.stdout and "failures:" not in result.stdout
        assert redis.Redis.from_url(broker.url).dbsize() == 0  # flushed
    finally:
        broker.stop()
    with psycopg.connect(f"{server}/postgres") as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name]).fetchone()[0] == 0
