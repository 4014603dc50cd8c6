#!/usr/bin/env python
"""Capacity under a working day's traffic: gunicorn (config/gunicorn.conf.py, as `make serve` runs
it) on PostgreSQL with the demo data, driven by locust headless on the loopback interface with
bench/locustfile.py's mix (queue, case page, review inbox, API reads, ~5% writes, logins).
It prints, it never asserts.

    make bench-load                      # 50 people for 5 minutes
    .venv/bin/python bench/load.py --users 50 --minutes 5 [--port 18100] [--keep-database]

The database (LOAD_BENCH_DATABASE_URL, default …/arbiter_bench_load) is the benchmark's own: it is
dropped, created, migrated and seeded with `manage.py seed_demo` at the start and dropped at the
end. Queued tasks go to a Redis database of their own (LOAD_BENCH_BROKER_URL, default DB 11), which
is flushed at the end: no worker runs, only the web is measured. gunicorn and locust each run in
a session of their own and are stopped as a group. Target on an idle 2-core machine: p95 under
500 ms with 0 errors; the machine's load average before and after is printed beside the figures."""

from __future__ import annotations

import argparse
import base64
import csv
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/arbiter_bench_load"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/11"


def _with_db(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def _database_name(url: str) -> str:
    name = urlsplit(url).path.lstrip("/")
    if not name.startswith("arbiter_bench"):  # never a database anyone keeps
        raise SystemExit(f"refusing to drop {name!r}: the load benchmark's database must be named arbiter_bench…")
    return name


def recreate_database(url: str, *, drop_only: bool = False) -> None:
    import psycopg

    name = _database_name(url)
    with psycopg.connect(_with_db(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def flush_broker(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(args, var_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in {"DJANGO_SETTINGS_MODULE", "MAKEFLAGS"}}
    env.update({
        "DATABASE_URL": args.database_url, "CELERY_BROKER_URL": args.broker_url, "DEBUG": "0",
        "SECRET_KEY": "bench-load-" + "k" * 50, "ALLOWED_HOSTS": "127.0.0.1", "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0", "ARBITER_VAR_DIR": str(var_dir),
        "LOG_LEVEL": "WARNING", "DEMO_PASSWORD": "arbiter-demo",
        # A key for this throwaway database's audit ledger only (required unless DEBUG).
        "ARBITER_AUDIT_KEYS": "k1:" + base64.b64encode(secrets.token_bytes(32)).decode(),
        "PROMETHEUS_MULTIPROC_DIR": str(var_dir / "prometheus"),
    })
    return env


def prepare(env: dict[str, str]) -> None:
    started = time.monotonic()
    for command in (["migrate", "--verbosity", "0"], ["seed_demo"], ["collectstatic", "--noinput", "-v0"]):
        subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL)
    print(f"database migrated and seeded with the demo data in {time.monotonic() - started:.0f} s")


def wait_for(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {timeout:g} s")


def stop_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def summarise(stats_csv: Path) -> list[dict[str, str]]:
    with stats_csv.open(newline="") as handle:
        return list(csv.DictReader(handle))


def report(rows: list[dict[str, str]], *, users: int, minutes: float, gunicorn: str, load_before,
           load_after) -> None:
    print(f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {users} users for {minutes:g} min, gunicorn {gunicorn}, "
          f"{os.cpu_count()} CPUs; load average before {load_before[0]:.2f} / {load_before[1]:.2f} / "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f}")
    print(f"{'request':34} {'count':>7} {'fails':>6} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'max ms':>7} "
          f"{'req/s':>7}")
    for row in rows:
        print(f"{row['Name'][:34]:34} {row['Request Count']:>7} {row['Failure Count']:>6} {row['50%']:>7} "
              f"{row['95%']:>7} {row['99%']:>7} {float(row['Max Response Time']):>7.0f} "
              f"{float(row['Requests/s']):>7.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--spawn-rate", type=float, default=5)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--port", type=int, default=0, help="the web's port (default: a free one)")
    parser.add_argument("--database-url", default=os.environ.get("LOAD_BENCH_DATABASE_URL") or DEFAULT_DATABASE_URL)
    parser.add_argument("--broker-url", default=os.environ.get("LOAD_BENCH_BROKER_URL") or DEFAULT_BROKER_URL)
    parser.add_argument("--gunicorn-arg", action="append", default=[], metavar="ARG",
                        help="one more gunicorn argument, e.g. --gunicorn-arg=--worker-class=sync (repeatable)")
    parser.add_argument("--keep-database", action="store_true", help="leave the seeded database (for profiling)")
    parser.add_argument("--var-dir", type=Path, default=ROOT / "var" / "bench-load",
                        help="where the logs, locust's CSV files and the metrics files go")
    args = parser.parse_args()

    var_dir = args.var_dir
    (var_dir / "prometheus").mkdir(parents=True, exist_ok=True)
    for old in (var_dir / "prometheus").glob("*.db"):
        old.unlink()
    env = server_env(args, var_dir)
    port = args.port or free_port()
    recreate_database(args.database_url)
    web = locust = None
    try:
        prepare(env)
        web = subprocess.Popen([str(BIN / "gunicorn"), "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
                                "--config", "config/gunicorn.conf.py", "--name", "arbiter-bench-web",
                                *args.gunicorn_arg],
                               cwd=ROOT, env=env, start_new_session=True,
                               stdout=open(var_dir / "web.log", "wb"), stderr=subprocess.STDOUT)
        wait_for(f"http://127.0.0.1:{port}/healthz", timeout=90)
        load_before = os.getloadavg()
        locust = subprocess.Popen([str(BIN / "locust"), "-f", "bench/locustfile.py", "--headless", "--only-summary",
                                   "--users", str(args.users), "--spawn-rate", str(args.spawn_rate),
                                   "--run-time", f"{int(args.minutes * 60)}s", "--host", f"http://127.0.0.1:{port}",
                                   "--csv", str(var_dir / "locust"), "--loglevel", "WARNING"],
                                  cwd=ROOT, env=env, start_new_session=True,
                                  stdout=open(var_dir / "locust.log", "wb"), stderr=subprocess.STDOUT)
        locust.wait(timeout=args.minutes * 60 + 120)
        load_after = os.getloadavg()
        report(summarise(var_dir / "locust_stats.csv"), users=args.users, minutes=args.minutes,
               gunicorn=" ".join(args.gunicorn_arg) or "as config/gunicorn.conf.py sets it",
               load_before=load_before, load_after=load_after)
        failures = var_dir / "locust_failures.csv"
        if failures.exists() and len(failures.read_text().splitlines()) > 1:
            print("\nfailures:\n" + failures.read_text())
    finally:
        for process in (locust, web):
            if process is not None:
                stop_group(process)
        flush_broker(args.broker_url)
        if not args.keep_database:
            recreate_database(args.database_url, drop_only=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
