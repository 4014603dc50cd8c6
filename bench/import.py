#!/usr/bin/env python
"""`make bench-import`: bulk intake into PostgreSQL (README "Complaints in: bulk intake").

Synthesises a CFPB export of `--rows` rows (100,000 by default) from the shipped
analyst/data/cfpb_complaints.csv, each row with a new Complaint ID, into a temporary file; builds a
throwaway database (`--database-url`, dropped and recreated); then runs
`manage.py import_complaints` in a child process and reports rows/s and the child's peak RSS. A
smaller import (`--small-rows`) is run first in its own child on the same database, so the two
peaks show whether memory grows with the file. Then `audit_verify` over everything written.
It measures, it never asserts; `--results` appends the figures to bench/RESULTS.md."""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

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


def run_import(path: Path, env: dict) -> dict:
    """One `manage.py import_complaints` in a child process: wall seconds and its peak RSS (MiB)."""
    wait_start = time.monotonic()
    child = subprocess.Popen([sys.executable, "manage.py", "import_complaints", str(path), "--tenant", "bench"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    _pid, status, usage = os.wait4(child.pid, 0)
    seconds = time.monotonic() - wait_start
    output = child.stdout.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"import_complaints failed:\n{output}")
    created = int(re.search(r"(\d+) cases opened", output).group(1))
    return {"seconds": seconds, "created": created, "rss_mb": usage.ru_maxrss / 1024, "output": output.strip()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get(
        "BENCH_IMPORT_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/arbiter_bench_import"))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--small-rows", type=int, default=10_000)
    parser.add_argument("--label", default="")
    parser.add_argument("--results", default="", help="append the figures to this Markdown file")
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
    with tempfile.TemporaryDirectory() as folder:
        small, large = Path(folder) / "small.csv", Path(folder) / "large.csv"
        small_bytes = synthesise(small, args.small_rows, FIRST_ID)
        large_bytes = synthesise(large, args.rows, FIRST_ID + args.small_rows)
        first = run_import(small, env)
        second = run_import(large, env)
        again = run_import(large, env)
    verify_start = time.monotonic()
    verified = subprocess.run([sys.executable, "manage.py", "audit_verify"], cwd=ROOT, env=env, capture_output=True,
                              text=True)
    verify_seconds = time.monotonic() - verify_start
    lines = [
        f"### import {args.label or datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        "| import | rows | file | seconds | rows/s | peak RSS of the process |",
        "|---|---:|---:|---:|---:|---:|",
        f"| small, new | {args.small_rows:,} | {small_bytes / 1e6:.1f} MB | {first['seconds']:.1f} | "
        f"{args.small_rows / first['seconds']:,.0f} | {first['rss_mb']:.0f} MiB |",
        f"| large, new | {args.rows:,} | {large_bytes / 1e6:.1f} MB | {second['seconds']:.1f} | "
        f"{args.rows / second['seconds']:,.0f} | {second['rss_mb']:.0f} MiB |",
        f"| large again (all already imported) | {args.rows:,} | {large_bytes / 1e6:.1f} MB | {again['seconds']:.1f} | "
        f"{args.rows / again['seconds']:,.0f} | {again['rss_mb']:.0f} MiB |",
        "",
        f"- Cases opened: {first['created']:,} + {second['created']:,}; the second import of the large file opened "
        f"{again['created']:,}.",
        f"- Seconds include the process's start, the file check (one pass) and the import (a second pass). "
        f"audit_verify afterwards: {verify_seconds:.0f} s, exit {verified.returncode}: "
        f"{(verified.stdout.strip().splitlines() or [''])[-1]}",
        f"- Bench process peak RSS (synthesis): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB.",
        "",
    ]
    print("\n".join(lines))
    if args.results:
        with open(args.results, "a", encoding="utf-8") as out:
            out.write("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
