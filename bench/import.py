#!/usr/bin/env python
"""`make bench-import`: bulk intake into PostgreSQL (README "Complaints in: bulk intake").

Synthesises a CFPB export of `--rows` rows (100,000 by default) from the shipped
analyst/data/cfpb_complaints.csv, each row with a new Complaint ID, into a temporary file; builds a
throwaway database (`--database-url`, dropped and recreated); then runs
`manage.py import_complaints` in a child process and reports rows/s and the child's peak RSS. A
smaller import (`--small-rows`) is run first in its own child on the same database, so the two
peaks show whether memory grows with the file. Then `audit_verify` over everything written.
It measures, it never asserts; `--results` appends the figures to bench/RESULTS.md.

`--versus DIR` compares instead: the code of this tree and of DIR (another checkout, e.g. `git
archive main`) import fresh files of `--rows` rows into the same database, alternately, `--rounds`
times; each import runs in a child that times its own CPU (time.process_time) and the CPU of each
thread around complaint_import_run only (no start-up), with the load average beside each figure."""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
SHIPPED = ROOT / "analyst" / "data" / "cfpb_complaints.csv"
FIRST_ID = 900_000_000


def synthesise(path: Path, rows: int, first_id: int) -> int:
    """Write `rows` rows cycled from the shipped export with fresh Complaint IDs; its size in bytes."""
    with SHIPPED.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        source = list(reader)
    id_column = header.index("Complaint ID")
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        for number in range(rows):
            row = list(source[number % len(source)])
            row[id_column] = str(first_id + number)
            writer.writerow(row)
    return path.stat().st_size


class BackendCpu(threading.Thread):
    """The CPU seconds of the PostgreSQL backends serving `database` while it runs (sampled from
    /proc every 0.2 s; the machine is shared, so wall time alone says little)."""

    def __init__(self, url: str, database: str):
        super().__init__(daemon=True)
        self.url, self.database, self.seen, self.done = url, database, {}, threading.Event()

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.done.is_set():
                pids = [row[0] for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [self.database])]
                for pid in pids:
                    try:
                        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    self.seen[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
                time.sleep(0.2)

    def seconds(self) -> float:
        self.done.set()
        self.join()
        return sum(self.seen.values())


def run_import(path: Path, env: dict, url: str) -> dict:
    """One `manage.py import_complaints` in a child process: wall seconds, its CPU seconds and peak
    RSS (MiB), and the CPU seconds of its database backend."""
    backend = BackendCpu(url, urlsplit(url).path.lstrip("/"))
    backend.start()
    wait_start = time.monotonic()
    child = subprocess.Popen([sys.executable, "manage.py", "import_complaints", str(path), "--tenant", "bench"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    output = child.stdout.read()
    _pid, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - wait_start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"import_complaints failed:\n{output}")
    created = int(re.search(r"(\d+) cases opened", output).group(1))
    return {"seconds": seconds, "created": created, "rss_mb": usage.ru_maxrss / 1024, "output": output.strip(),
            "client_cpu": usage.ru_utime + usage.ru_stime, "backend_cpu": backend.seconds()}


def row_line(name: str, rows: int, size: int, run: dict) -> str:
    cpu_ms = 1000 * (run["client_cpu"] + run["backend_cpu"]) / rows
    return (f"| {name} | {rows:,} | {size / 1e6:.1f} MB | {run['seconds']:.1f} | {rows / run['seconds']:,.0f} | "
            f"{1000 * run['client_cpu'] / rows:.2f} + {1000 * run['backend_cpu'] / rows:.2f} ms | "
            f"{1000 / cpu_ms:,.0f} | {run['rss_mb']:.0f} MiB |")


# Run in a child with its cwd at the tree compared: one import of argv[1], its CPU timed from inside.
_TIMED_IMPORT = """
import os, sys, time
sys.path.insert(0, os.getcwd())
import django
django.setup()
from accounts.models import Tenant
from core.actors import Actor
from intake.services import complaint_import_claim, complaint_import_run, complaint_import_start
tenant = Tenant.objects.get(slug="bench")
started = complaint_import_start(actor=Actor.system("bench"), tenant=tenant, path=sys.argv[1], enqueue=False)
claimed = complaint_import_claim(import_id=started.pk)
cpu, main, wall = time.process_time(), time.thread_time(), time.monotonic()
with open(sys.argv[1], "rb") as handle:
    complaint_import_run(complaint_import=claimed, handle=handle)
cpu, main, wall = time.process_time() - cpu, time.thread_time() - main, time.monotonic() - wall
print(f"{claimed.created_count} {cpu:.3f} {main:.3f} {wall:.3f}")
"""


def compare(args, env: dict) -> list[str]:
    """Alternate this tree's import with `args.versus`'s on fresh files; a Markdown table."""
    trees = {"old": Path(args.versus).resolve(), "new": ROOT}
    lines = ["| round | tree | rows | import CPU s | ms/row | of it main thread ms/row | wall s | load (1/5 min) |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    totals = {"old": 0.0, "new": 0.0}
    first_id = FIRST_ID
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.rounds):
            order = ("old", "new") if number % 2 == 0 else ("new", "old")
            for name in order:
                path = Path(folder) / f"{name}-{number}.csv"
                synthesise(path, args.rows, first_id)
                first_id += args.rows
                done = subprocess.run([sys.executable, "-c", _TIMED_IMPORT, str(path)], cwd=trees[name], env=env,
                                      capture_output=True, text=True, check=True)
                created, cpu, main, wall = done.stdout.split()[-4:]
                load = os.getloadavg()
                totals[name] += float(cpu)
                lines.append(f"| {number} | {name} | {int(created):,} | {float(cpu):.1f} | "
                             f"{1000 * float(cpu) / args.rows:.3f} | {1000 * float(main) / args.rows:.3f} | {float(wall):.1f} | {load[0]:.1f} / {load[1]:.1f} |")
                print(lines[-1], flush=True)
                path.unlink()
    lines.append(f"\nImport CPU, all rounds: old {totals['old']:.1f} s, new {totals['new']:.1f} s, "
                 f"old / new = {totals['old'] / totals['new']:.2f}.")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get(
        "BENCH_IMPORT_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arbiter_bench_import"))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--label", default="")
    parser.add_argument("--results", default="", help="append the figures to this Markdown file")
    parser.add_argument("--versus", default="", help="another tree to compare with, alternately (see above)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from steps import recreate_database

    recreate_database(args.database_url)
    sys.path.insert(0, str(ROOT))
    from audit.keys import development_key_ring, key_ring_setting

    # DEBUG off, as in production (with DEBUG Django keeps every statement in memory); a throwaway key.
    secret = "bench-import-only-secret-key-not-for-any-deployment"
    env = {**os.environ, "DATABASE_URL": args.database_url, "DEBUG": "0", "SECRET_KEY": secret,
           "ARBITER_AUDIT_KEYS": key_ring_setting(development_key_ring(secret)),
           "DJANGO_SETTINGS_MODULE": "config.settings", "ARBITER_VAR_DIR": tempfile.mkdtemp(prefix="arbiter-bench-import-")}
    subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([sys.executable, "manage.py", "shell", "-c",
                    "from accounts.models import Tenant; Tenant.objects.create(slug='bench', name='Bench')"],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    if args.versus:
        print("\n".join(compare(args, env)))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        small, large = Path(folder) / "small.csv", Path(folder) / "large.csv"
        small_bytes = synthesise(small, args.small_rows, FIRST_ID)
        large_bytes = synthesise(large, args.rows, FIRST_ID + args.small_rows)
        first = run_import(small, env, args.database_url)
        second = run_import(large, env, args.database_url)
        again = run_import(large, env, args.database_url)
    verify_start = time.monotonic()
    verified = subprocess.run([sys.executable, "manage.py", "audit_verify"], cwd=ROOT, env=env, capture_output=True,
                              text=True)
    verify_seconds = time.monotonic() - verify_start
    load = os.getloadavg()
    lines = [
        f"### import {args.label or datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        "| import | rows | file | seconds | rows/s | CPU per row: import process + its database backend | "
        "rows/s by CPU | peak RSS of the import process |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        row_line("small, new", args.small_rows, small_bytes, first),
        row_line("large, new", args.rows, large_bytes, second),
        row_line("large again (all already imported)", args.rows, large_bytes, again),
        "",
        f"- Cases opened: {first['created']:,} + {second['created']:,}; the second import of the large file opened "
        f"{again['created']:,}.",
        f"- Seconds include the process's start, the file check (one pass) and the import (a second pass). "
        f"audit_verify afterwards: {verify_seconds:.0f} s, exit {verified.returncode}: "
        f"{(verified.stdout.strip().splitlines() or [''])[-1]}",
        f"- Bench process peak RSS (synthesis): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB. "
        f"Load average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs. "
        f"\"rows/s by CPU\" is 1 / (CPU per row): the rate if the import and its backend had the CPU to "
        f"themselves, one after the other.",
        "",
    ]
    print("\n".join(lines))
    if args.results:
        with open(args.results, "a", encoding="utf-8") as out:
            out.write("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
