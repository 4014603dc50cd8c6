#!/usr/bin/env python
"""`make bench` (step part): the cost of a durable agent step (ADR 0010).

Three competitors run the same null graph — one node looping N times (default 200), appending
~500 bytes per step — on the same PostgreSQL, alternated A/B/C (the order rotates each round) for
several rounds, with 1 and with 4 worker processes, each process started in its own session so the
kernel gives each its own CPU share:

  arbiter    Arbiter's real executor (runs.executor.drive_inline: leases, checkpoints, Step rows,
             audit events — everything a production step writes)
  floor      plain psycopg: INSERT step + UPDATE run + COMMIT per step, nothing else
  langgraph  LangGraph + PostgresSaver with durability="sync", from the benchmark's own virtualenv
             (var/bench-venv, created by `make bench`; never a project dependency)

It reports steps/s (median over rounds), the ratios the issue sets targets for, commits per step
(pg_stat_database.xact_commit of the bench database), writing transactions per step (xids
consumed; the minimum over rounds, as other databases of the cluster can only add to it), WAL
bytes per step (pg_current_wal_lsn, cluster-wide: again the minimum over rounds), client CPU per
step; then storage per step at N = 50/200/1,000 and state-load times. Results are printed and
appended to bench/RESULTS.md with the date, commit and machine. It measures, it never asserts.

    python bench/steps.py [--database-url postgres://postgres@127.0.0.1:5432/arbiter_bench_steps]
                          [--rounds 3] [--steps 200] [--langgraph-python var/bench-venv/bin/python]
                          [--arbiter-root PATH]   (another checkout's code, e.g. for a before/after)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "step_worker.py"
MODES = ("arbiter", "floor", "langgraph")


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def recreate_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(_with_db(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def prepare(url: str, args) -> dict:
    env = {**os.environ, "DATABASE_URL": url, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=args.arbiter_root, env=env,
                   check=True)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_floor_run (id bigserial PRIMARY KEY, label text, sequence int)")
        conn.execute("CREATE TABLE bench_floor_step (id bigserial PRIMARY KEY, run_id bigint REFERENCES "
                     "bench_floor_run(id), sequence int, payload text, created_at timestamptz DEFAULT now(), "
                     "UNIQUE (run_id, sequence))")
        conn.execute("INSERT INTO accounts_tenant (name, slug, created_at) VALUES ('Bench', 'bench', now())")
    versions = {}
    if args.langgraph_python:
        out = subprocess.run([args.langgraph_python, str(WORKER), "langgraph-setup", url], check=True,
                             capture_output=True, text=True).stdout
        versions = json.loads(out.strip().splitlines()[-1])
    return versions


def _stats(url: str) -> dict:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        commits = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                               ).fetchone()[0]
        lsn = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()[0]
        xid = conn.execute("SELECT txid_snapshot_xmax(txid_current_snapshot())").fetchone()[0]
    return {"commits": int(commits), "wal": int(lsn), "xid": int(xid)}


def _cpu_ticks() -> tuple[int, int]:
    """Machine-wide (busy, total) CPU time from /proc/stat, in clock ticks: every process's share —
    the workers', PostgreSQL's backends, WAL writer and checkpointer — not only the workers'."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def _command(mode: str, url: str, n: int, label: str, args) -> list[str]:
    if mode == "arbiter":
        return [sys.executable, str(WORKER), "arbiter", url, str(n), label, str(args.arbiter_root)]
    if mode == "floor":
        return [sys.executable, str(WORKER), "floor", url, str(n), label]
    return [args.langgraph_python, str(WORKER), "langgraph", url, str(n), label]


def run_group(mode: str, procs: int, url: str, args, label: str) -> dict:
    env = {**os.environ, "BENCH_WARMUP_STEPS": str(args.warmup_steps)}
    workers = [subprocess.Popen(_command(mode, url, args.steps, f"{label}-{i}", args), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, start_new_session=True, env=env)
               for i in range(procs)]
    try:
        for worker in workers:
            line = worker.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"{mode} worker did not start: {line!r}")
        time.sleep(1.1)  # let the statistics collector settle before the snapshot
        before = _stats(url)
        ticks_before = _cpu_ticks()
        started = time.perf_counter()
        for worker in workers:
            worker.stdin.write("go\n")
            worker.stdin.flush()
        results = [json.loads(worker.stdout.readline()) for worker in workers]
        elapsed = time.perf_counter() - started
        ticks_after = _cpu_ticks()
        for worker in workers:
            worker.wait(timeout=60)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    time.sleep(1.1)
    after = _stats(url)
    steps = sum(r["steps"] for r in results)
    return {"mode": mode, "procs": procs, "steps": steps, "seconds": elapsed, "steps_per_s": steps / elapsed,
            "commits_per_step": (after["commits"] - before["commits"]) / steps,
            "xids_per_step": (after["xid"] - before["xid"]) / steps,
            "wal_per_step": (after["wal"] - before["wal"]) / steps,
            "cpu_ms_per_step": 1000 * sum(r["cpu_seconds"] for r in results) / steps,
            "machine_cpu_ms_per_step": 1000 * (ticks_after[0] - ticks_before[0]) / os.sysconf("SC_CLK_TCK") / steps,
            "machine_busy": (ticks_after[0] - ticks_before[0]) / max(ticks_after[1] - ticks_before[1], 1),
            "runs": [r["run"] for r in results]}


def storage_and_loads(url: str, args) -> dict:
    """Arbiter's bytes per step at N = 50/200/1,000 (as the code computes them and as PostgreSQL
    stores the rows) and state-load times; LangGraph's bytes per step for the same runs."""
    sys.path.insert(0, str(args.arbiter_root))
    sys.path.insert(0, str(WORKER.parent))
    # Celery's import puts the working directory first on sys.path: run from the tree measured, or
    # `--arbiter-root` would load this checkout's code (the workers chdir too, bench/step_worker.py).
    os.chdir(args.arbiter_root)
    os.environ.update({"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1",
                       "ARBITER_TENANT_MAX_CONCURRENT_RUNS": "64"})
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    settings.DEBUG = False
    from accounts.models import Tenant
    from core.actors import Actor
    from runs import services
    from runs.executor import drive_inline
    from runs.graph import GRAPHS
    from runs.state_load import state_at

    GRAPHS["bench_null"] = "null_graph:GRAPH"
    tenant = Tenant.objects.get(slug="bench")
    out: dict = {"arbiter": {}, "langgraph": {}, "load_ms": {}}
    runs = {}
    for n in (10, 50, 200, 1000):
        run = services.run_start(actor=Actor.system("bench"), tenant=tenant, graph="bench_null", input={"n": n},
                                 budget={"max_steps": n + 1, "max_tokens": 10**9, "max_wall_seconds": 86400},
                                 enqueue=False)
        drive_inline(run_id=run.pk, worker_id="bench:storage", timeout_seconds=3600)
        runs[n] = run
        if n == 10:
            continue
        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(sum(size_bytes), 0), coalesce(sum(pg_column_size(c.*)), 0) "
                           "FROM runs_checkpoint c WHERE run_id = %s", [run.pk])
            code_bytes, row_bytes = cursor.fetchone()
            cursor.execute("SELECT coalesce(sum(pg_column_size(s.*)), 0) FROM runs_step s WHERE run_id = %s",
                           [run.pk])
            step_bytes = cursor.fetchone()[0]
            cursor.execute("SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM audit_auditevent e "
                           "WHERE run_id = %s", [str(run.pk)])
            audit_bytes = cursor.fetchone()[0]
        out["arbiter"][n] = {"checkpoint_code": code_bytes / n, "checkpoint_rows": row_bytes / n,
                             "all_rows": (row_bytes + step_bytes + audit_bytes) / n}
    for label, run, sequence in (("10 steps, latest", runs[10], None), ("1,000 steps, latest", runs[1000], None),
                                 ("1,000 steps, #500", runs[1000], 500), ("1,000 steps, #999", runs[1000], 999)):
        times = []
        for _ in range(25):
            started = time.perf_counter()
            state_at(run, sequence)
            times.append(time.perf_counter() - started)
        out["load_ms"][label] = 1000 * statistics.median(times)
    # The append-only lists' stored items load when first read (ADR 0010 decision 9): what reading
    # them all costs on top, and what hashing the loaded state costs (it needs no fetch).
    if hasattr(state_at(runs[1000])[0].notes, "as_list"):
        for label, read in (("1,000 steps, latest + every note read", lambda state: state.notes.as_list()),
                            ("1,000 steps, latest + state hash", lambda state: state.hash())):
            times = []
            for _ in range(25):
                started = time.perf_counter()
                read(state_at(runs[1000])[0])
                times.append(time.perf_counter() - started)
            out["load_ms"][label] = 1000 * statistics.median(times)
    if args.langgraph_python:
        for n in (50, 200, 1000):
            line = subprocess.run(_command("langgraph", url, n, f"storage-{n}", args)[:4] + [str(n), f"s{n}"],
                                  input="go\n", capture_output=True, text=True, check=True).stdout.splitlines()[-1]
            thread = json.loads(line)["run"]
            with connection.cursor() as cursor:
                total = 0
                for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
                    cursor.execute(f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t "
                                   f"WHERE thread_id = %s", [thread])
                    total += cursor.fetchone()[0]
            out["langgraph"][n] = total / n
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}"


def _median_of(groups: list[dict], mode: str, procs: int, key: str) -> float:
    values = [g[key] for g in groups if g["mode"] == mode and g["procs"] == procs and key in g]
    return statistics.median(values) if values else 0.0


def report(groups: list[dict], storage: dict, versions: dict, args, pg_version: str) -> str:
    lines = []
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines.append(f"### Step benchmark — {stamp}, commit {_commit()}{' ' + args.label if args.label else ''}")
    lines.append("")
    lines.append(f"Machine: {_machine()}; {pg_version}; "
                 f"{', '.join(f'{k} {v}' for k, v in versions.items()) or 'LangGraph not run'}; "
                 f"{args.rounds} rounds × {args.steps} steps per process, order rotated each round"
                 + (f"; each worker process first ran an untimed {args.warmup_steps}-step warm-up run"
                    if args.warmup_steps else "; no warm-up run (process start-up costs are in the timed run)")
                 + ".")
    lines.append("")
    lines.append("| | 1 process (steps/s) | 4 processes (steps/s) | commits/step | writing tx/step | WAL/step | "
                 "client CPU/step | machine CPU/step, 1p / 4p | machine busy, 4p |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    medians = {}
    for mode in MODES:
        by_procs = {}
        for procs in (1, 4):
            rows = [g for g in groups if g["mode"] == mode and g["procs"] == procs]
            if rows:
                by_procs[procs] = statistics.median(g["steps_per_s"] for g in rows)
        if not by_procs:
            continue
        medians[mode] = by_procs
        rows = [g for g in groups if g["mode"] == mode and g["procs"] == 1] or \
            [g for g in groups if g["mode"] == mode]
        lines.append(f"| {mode} | {by_procs.get(1, 0):,.0f} | {by_procs.get(4, 0):,.0f} | "
                     f"{statistics.median(g['commits_per_step'] for g in rows):.2f} | "
                     f"{min(g['xids_per_step'] for g in rows):.2f} | "
                     f"{min(g['wal_per_step'] for g in rows) / 1024:.1f} KB | "
                     f"{statistics.median(g['cpu_ms_per_step'] for g in rows):.2f} ms | "
                     f"{_median_of(groups, mode, 1, 'machine_cpu_ms_per_step'):.2f} / "
                     f"{_median_of(groups, mode, 4, 'machine_cpu_ms_per_step'):.2f} ms | "
                     f"{100 * _median_of(groups, mode, 4, 'machine_busy'):.0f}% |")
    lines.append("")
    lines.append("Machine CPU per step: every process's CPU time (workers, PostgreSQL's backends and "
                 "background processes) from /proc/stat over the group's run, divided by its steps; "
                 "with 4 processes on 2 cores, throughput is bounded by 2 s of CPU per second over it.")
    lines.append("")
    if "arbiter" in medians:
        for procs in (1, 4):
            parts = []
            for other in ("langgraph", "floor"):
                if other in medians and medians[other].get(procs):
                    parts.append(f"{medians['arbiter'][procs] / medians[other][procs]:.2f}× {other}")
            lines.append(f"- Arbiter with {procs} process{'es' if procs > 1 else ''}: {', '.join(parts)} "
                         f"(targets: ≥ 2× langgraph, ≥ 0.4× floor)")
        per_round = []
        for procs in (1, 4):
            for r in range(args.rounds):
                row = {g["mode"]: g["steps_per_s"] for g in groups if g["procs"] == procs and g.get("round") == r}
                if {"arbiter", "floor", "langgraph"} <= row.keys():
                    per_round.append(f"{procs}p r{r + 1}: {row['arbiter'] / row['langgraph']:.2f}× lg, "
                                     f"{row['arbiter'] / row['floor']:.2f}× floor")
        if per_round:
            lines.append(f"- Per round: {'; '.join(per_round)}")
    if storage:
        lines.append("")
        lines.append("| bytes per step | N = 50 | N = 200 | N = 1,000 |")
        lines.append("|---|---:|---:|---:|")
        arb = storage["arbiter"]
        for key, label in (("checkpoint_code", "Arbiter checkpoints (size the code computes)"),
                           ("checkpoint_rows", "Arbiter checkpoint rows (pg_column_size)"),
                           ("all_rows", "Arbiter checkpoint + step + audit rows")):
            lines.append(f"| {label} | " + " | ".join(f"{arb[n][key]:,.0f}" for n in (50, 200, 1000)) + " |")
        if storage["langgraph"]:
            lg = storage["langgraph"]
            lines.append("| LangGraph checkpoints + blobs + writes | " +
                         " | ".join(f"{lg[n]:,.0f}" for n in (50, 200, 1000)) + " |")
        lines.append("")
        lines.append("State load (state_at, median of 25): " +
                     "; ".join(f"{k}: {v:.2f} ms" for k, v in storage["load_ms"].items()))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL",
                                                                  "postgres://postgres@127.0.0.1:5432/arbiter_bench_steps"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--procs", default="1,4")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--langgraph-python", default=str(ROOT / "var" / "bench-venv" / "bin" / "python"))
    parser.add_argument("--arbiter-root", default=str(ROOT))
    parser.add_argument("--no-storage", action="store_true")
    parser.add_argument("--warmup-steps", type=int, default=5,
                        help="each worker first runs a separate, untimed run of this many steps (every competitor)")
    parser.add_argument("--label", default="", help="a note for the results heading (e.g. 'before')")
    parser.add_argument("--results", default=str(ROOT / "bench" / "RESULTS.md"))
    args = parser.parse_args()
    for name in ("results", "arbiter_root", "langgraph_python"):  # storage_and_loads changes directory
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))  # not resolve(): a venv python is a symlink
    modes = [m for m in args.modes.split(",") if m]
    if "langgraph" in modes and not Path(args.langgraph_python).exists():
        print(f"LangGraph's virtualenv {args.langgraph_python} is missing (make bench creates it); "
              f"running without it.")
        modes.remove("langgraph")
    if "langgraph" not in modes:
        args.langgraph_python = ""
    url = args.database_url
    try:
        recreate_database(url)
    except Exception as exc:  # no PostgreSQL here: say so, the rest of make bench still ran
        print(f"Step benchmark skipped: PostgreSQL at {_with_db(url, '')} is not reachable ({exc}).")
        return 0
    versions = prepare(url, args)
    import psycopg

    with psycopg.connect(url) as conn:
        pg_version = "PostgreSQL " + conn.execute("SHOW server_version").fetchone()[0]
    groups = []
    for procs in [int(p) for p in args.procs.split(",")]:
        for r in range(args.rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for mode in order:
                group = run_group(mode, procs, url, args, label=f"{mode}-{procs}-{r}")
                group["round"] = r
                groups.append(group)
                print(f"{procs}p round {r + 1} {mode:<10} {group['steps_per_s']:8,.0f} steps/s  "
                      f"{group['commits_per_step']:.2f} commits/step  {group['xids_per_step']:.2f} tx/step  "
                      f"{group['wal_per_step'] / 1024:6.1f} KB WAL/step  {group['cpu_ms_per_step']:.2f} ms CPU/step  "
                      f"machine {group['machine_cpu_ms_per_step']:.2f} ms/step, {100 * group['machine_busy']:.0f}% busy",
                      flush=True)
    storage = {} if args.no_storage or "arbiter" not in modes else storage_and_loads(url, args)
    text = report(groups, storage, versions, args, pg_version)
    print()
    print(text)
    results = Path(args.results)
    if not results.exists():
        results.write_text("# Benchmark results\n\nAppended by `make bench` (bench/steps.py); newest last.\n\n")
    with results.open("a") as handle:
        handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
