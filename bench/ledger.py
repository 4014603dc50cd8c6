#!/usr/bin/env python
"""`make bench-ledger`: audit_verify and case_replay --all at ledger scale (ADR 0010).

Builds a throwaway PostgreSQL database (dropped and recreated) holding `--events` audit events
(valid hash chains, `--per-stream` events per stream) and as many case events (cases cloned from
one real case with a long history, each replaying to its stored row), then times:

    audit_verify             the full walk (streamed, batched, server-side cursors)
    audit_verify --since     after appending `--appended` events to a few streams
    case_replay --all        every case against its events

and reports events/s and the process's peak memory. It measures, it never asserts.

While iterating: `--reuse` keeps a database already built (the --since appends then pile up on it),
`--skip-cases` leaves out the case part (its build is most of the run), `--repeat N` times the full
walk N times (every verified head is deleted first, so each walk records them all, as the first).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import sys
import time
from collections import namedtuple
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ledger_exists(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute("SELECT to_regclass('audit_auditevent') IS NOT NULL").fetchone()[0]
    except psycopg.OperationalError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("BENCH_LEDGER_DATABASE_URL",
                                                                  "postgres://postgres@127.0.0.1:5432/arbiter_bench_ledger"))
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--per-stream", type=int, default=50)
    parser.add_argument("--appended", type=int, default=1000)
    parser.add_argument("--results", default=str(ROOT / "bench" / "RESULTS.md"))
    parser.add_argument("--reuse", action="store_true",
                        help="Keep the database if it already holds the ledger (and cases) of these sizes "
                             "instead of rebuilding it; the --since appends then land on top of the last run's.")
    parser.add_argument("--skip-cases", action="store_true", help="Only the audit ledger part (no case_replay).")
    parser.add_argument("--repeat", type=int, default=1, help="Time the full audit_verify this many times.")
    args = parser.parse_args()

    from steps import recreate_database

    fresh = not (args.reuse and _ledger_exists(args.database_url))
    if fresh:
        recreate_database(args.database_url)
    os.environ.update({"DATABASE_URL": args.database_url, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1"})
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    settings.DEBUG = False
    call_command("migrate", verbosity=0)
    from accounts.models import Role, Tenant, User

    lines = []
    if fresh:
        tenant = Tenant.objects.create(name="Bench", slug="bench")
        analyst = User.objects.create(username="bench-analyst", tenant=tenant, role=Role.ANALYST)
        _build_ledger(args, connection, tenant, lines)
    else:
        tenant, analyst = Tenant.objects.get(slug="bench"), User.objects.get(username="bench-analyst")
        lines.append("ledger reused (--reuse): " + _sizes(connection))

    def timed(*command):
        out = io.StringIO()
        rss = _rss_mb()
        begun = time.perf_counter()
        call_command(*command, stdout=out, stderr=io.StringIO())
        return time.perf_counter() - begun, out.getvalue(), _rss_mb() - rss

    from audit.models import AuditVerifiedHead

    for _ in range(args.repeat):
        AuditVerifiedHead.objects.all().delete()  # every full walk records every head, as the first one does
        elapsed, out, grew = timed("audit_verify", "--verbosity", "2")
        total = int(out.splitlines()[-1].split()[0])  # "<n> events read in ..."
        lines.append(f"audit_verify (full): {total:,} events in {elapsed:.1f} s → {total / elapsed:,.0f} events/s; "
                     f"peak memory grew {grew:.0f} MB; {out.splitlines()[0]}")
    from django.db import transaction

    from audit.services import audit_record

    for i in range(args.appended):
        with transaction.atomic():
            audit_record(tenant_id=tenant.pk, case_id=None, actor_type="system", actor_id="system:bench",
                         action="bench.appended", payload={"i": i})
    elapsed, out, grew = timed("audit_verify", "--since", "--verbosity", "2")
    lines.append(f"audit_verify --since after {args.appended:,} appends: {elapsed:.2f} s ({out.splitlines()[-1]})")
    if not args.skip_cases:
        _cases(args, connection, tenant, analyst, lines, timed, fresh)

    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = f"### Ledger benchmark — {stamp}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n"
    print(text)
    with open(args.results, "a") as handle:
        handle.write(text + "\n")
    return 0


def _sizes(connection) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT (SELECT count(*) FROM audit_auditevent), (SELECT count(*) FROM audit_auditstreamhead), "
                       "(SELECT count(*) FROM cases_caseevent)")
        events, streams, case_events = cursor.fetchone()
    return f"{events:,} audit events in {streams:,} streams, {case_events:,} case events"


def _build_ledger(args, connection, tenant, lines) -> None:
    from audit.hashing import HASHED_FIELDS, current_key_id, event_hash

    started = time.perf_counter()
    Row = namedtuple("Row", (*HASHED_FIELDS, "created_at", "key_id"))
    key_id = current_key_id()  # keyed like the ledger's own events (ADR 0017)
    streams = args.events // args.per_stream
    base = datetime(2026, 1, 1, tzinfo=UTC)
    columns = (*HASHED_FIELDS, "created_at", "key_id", "hash")
    with connection.cursor() as cursor:
        raw = cursor.cursor
        with raw.copy(f"COPY audit_auditevent ({', '.join(columns)}) FROM STDIN") as copy:
            heads = []
            for s in range(streams):
                stream, prev = f"bench:{s}", ""
                for n in range(1, args.per_stream + 1):
                    row = Row(tenant.pk, stream, n, "system", "system:bench", "bench.appended", "bench", str(s), "",
                              "", "", [], {"n": n, "note": "x" * 40}, prev,
                              base + timedelta(seconds=s * args.per_stream + n), key_id)
                    digest = event_hash(row)
                    copy.write_row([*(json.dumps(v) if name in ("evidence_refs", "payload") else v
                                      for name, v in zip(columns[:-1], row, strict=True)), digest])
                    prev = digest
                heads.append((stream, args.per_stream, prev))
        with raw.copy("COPY audit_auditstreamhead (stream, last_sequence, last_hash) FROM STDIN") as copy:
            for head in heads:
                copy.write_row(head)
    connection.commit() if not connection.get_autocommit() else None
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    lines.append(f"ledger built: {streams * args.per_stream:,} audit events in {streams:,} streams "
                 f"({time.perf_counter() - started:.0f} s)")


def _cases(args, connection, tenant, analyst, lines, timed, fresh) -> None:
    from cases import services
    from cases.models import CaseEvent

    if fresh or not CaseEvent.objects.exists():
        started = time.perf_counter()
        template = services.case_create(actor=analyst, tenant=tenant, title="Bench complaint", narrative="Charged twice.",
                                        product="Credit card", issue="Billing", company="Example Bank",
                                        complainant_email="c@example.org", source="bench", source_reference="t")
        services.case_transition(actor=analyst, case=template, transition="triage")
        services.case_transition(actor=analyst, case=template, transition="start_review")
        while template.events.count() < args.per_stream:
            services.case_transition(actor=analyst, case=template, transition="request_evidence")
            services.case_transition(actor=analyst, case=template, transition="receive_evidence")
        per_case = template.events.count()
        cases = args.events // per_case
        case_columns = [f.column for f in type(template)._meta.concrete_fields if f.column not in ("id", "reference")]
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO cases_case ({', '.join(case_columns)}, reference) "
                           f"SELECT {', '.join('c.' + c for c in case_columns)}, 'BENCH-' || lpad(g::text, 7, '0') "
                           f"FROM cases_case c, generate_series(1, %s) g WHERE c.id = %s", [cases - 1, template.pk])
            cursor.execute("INSERT INTO cases_caseevent (tenant_id, case_id, sequence, event_type, payload, case_version, "
                           "actor_type, actor_id, run_id, policy_version, created_at) "
                           "SELECT e.tenant_id, c.id, e.sequence, e.event_type, CASE WHEN e.event_type = 'case.created' "
                           "THEN jsonb_set(e.payload, '{reference}', to_jsonb(c.reference)) ELSE e.payload END, "
                           "e.case_version, e.actor_type, e.actor_id, e.run_id, e.policy_version, e.created_at "
                           "FROM cases_caseevent e, cases_case c WHERE e.case_id = %s AND c.reference LIKE 'BENCH-%%'",
                           [template.pk])
            cursor.execute("ANALYZE")
        lines.append(f"cases built: {cases:,} cases × {per_case} events = {cases * per_case:,} case events "
                     f"({time.perf_counter() - started:.0f} s)")
    total = CaseEvent.objects.count()
    cases = CaseEvent.objects.values("case_id").distinct().count()
    elapsed, out, grew = timed("case_replay", "--all")
    lines.append(f"case_replay --all: {total:,} events of {cases:,} cases in {elapsed:.1f} s → "
                 f"{total / elapsed:,.0f} events/s; peak memory grew {grew:.0f} MB; {out.strip()}")


if __name__ == "__main__":
    sys.exit(main())
