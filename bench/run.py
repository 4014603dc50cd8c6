#!/usr/bin/env python
"""`make bench`: a few figures about the write and read paths. It prints, it never asserts.

    audit_record appends/second, on one stream and spread over 50 streams
    case_create cases/second (through the service: case, narrative evidence, events, audit)
    case_list_for_user: queries and time for a tenant with 1,000 cases
    case_replay: time to rebuild and check a case with 500 events

It runs against a throwaway database: a fresh SQLite file under var/bench/ by default, or, when
DATABASE_URL is set, a `test_<name>` database created next to it (Django's test-database
machinery) and dropped at the end — your own data is never touched. With PostgreSQL it also
shows concurrent appends (4 threads on one stream vs. 4 threads on 4 streams)."""

from __future__ import annotations

import argparse
import io
import os
import platform
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()


class Bench:
    def __init__(self, args):
        self.args = args
        from accounts.models import Role, Tenant, User

        self.tenant = Tenant.objects.create(name="Bench Consumer Affairs", slug="bench")
        self.analyst = User.objects.create(username="bench-analyst", tenant=self.tenant, role=Role.ANALYST)
        self.supervisor = User.objects.create(username="bench-supervisor", tenant=self.tenant,
                                              role=Role.SUPERVISOR)

    # --- audit ----------------------------------------------------------------------------------

    def _append(self, stream_index: int) -> None:
        from django.db import transaction

        from audit.services import audit_record

        with transaction.atomic():  # one change, one transaction: as the services do
            audit_record(tenant_id=self.tenant.pk, case_id=1_000_000 + stream_index, actor_type="system",
                         actor_id="system:bench", action="bench.appended", target_type="bench",
                         target_id=stream_index, payload={"n": stream_index})

    def audit_appends(self, streams: int) -> str:
        count = self.args.audit_events
        started = time.perf_counter()
        for i in range(count):
            self._append(i % streams)
        elapsed = time.perf_counter() - started
        return f"{count} appends in {elapsed:.2f} s → {count / elapsed:,.0f} appends/s"

    def audit_concurrent(self, streams: int, threads: int = 4) -> str:
        from django.db import connection

        per_thread = max(1, self.args.audit_events // threads)
        offset = 500 + streams * 10  # fresh streams for this measurement

        def work(thread_index: int) -> None:
            try:
                for _ in range(per_thread):
                    self._append(offset + (thread_index % streams))
            finally:
                connection.close()

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - started
        total = per_thread * threads
        return f"{total} appends by {threads} threads in {elapsed:.2f} s → {total / elapsed:,.0f} appends/s"

    # --- cases ----------------------------------------------------------------------------------

    def _create(self, i: int):
        from cases.services import case_create

        return case_create(actor=self.analyst, tenant=self.tenant, title=f"Bench complaint {i}",
                           narrative=f"I was charged {{$1{i:03d}.00}} twice and the company refused to refund me.",
                           product="Credit card", issue="Problem with a purchase shown on your statement",
                           company="Example Bank, N.A.", complainant_email=f"consumer-{i}@example.org",
                           source="bench", source_reference=str(i))

    def case_create_rate(self) -> str:
        count = self.args.cases
        started = time.perf_counter()
        for i in range(count):
            self._create(i)
        elapsed = time.perf_counter() - started
        return f"{count} cases in {elapsed:.2f} s → {count / elapsed:,.0f} cases/s"

    def case_list(self) -> list[str]:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from cases.models import Case
        from cases.selectors import case_list_for_user

        existing = Case.objects.filter(tenant=self.tenant).count()
        for i in range(existing, self.args.list_cases):
            self._create(10_000 + i)
        lines = []
        for label, limit in (("all rows", None), ("first page of 50", 50)):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                qs = case_list_for_user(user=self.analyst)
                rows = list(qs if limit is None else qs[:limit])
                # What a queue page shows: touching these must not cost a query per row.
                shown = [(c.reference, c.status, c.risk_level, c.assignee_id and c.assignee.username,
                          c.pending_proposals) for c in rows]
                elapsed = time.perf_counter() - started
            lines.append(f"{label}: {len(shown)} cases, {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}, "
                         f"{elapsed * 1000:.1f} ms")
        return lines

    def case_replay(self) -> str:
        from django.core.management import call_command

        from cases.services import case_transition

        case = self._create(99_999)
        case_transition(actor=self.analyst, case=case, transition="triage")
        case_transition(actor=self.analyst, case=case, transition="start_review")
        events = case.events.count()
        while events < self.args.replay_events:
            case_transition(actor=self.analyst, case=case, transition="request_evidence")
            case_transition(actor=self.analyst, case=case, transition="receive_evidence")
            events += 2
        events = case.events.count()
        out = io.StringIO()
        started = time.perf_counter()
        call_command("case_replay", case.reference, stdout=out)
        elapsed = time.perf_counter() - started
        verdict = "matches" if "OK:" in out.getvalue() else "DIFFERS"
        return f"{events} events replayed in {elapsed * 1000:.1f} ms (the case {verdict} its replay)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--audit-events", type=int, default=2000)
    parser.add_argument("--cases", type=int, default=200, help="cases created for the case_create rate")
    parser.add_argument("--list-cases", type=int, default=1000, help="cases in the tenant for case_list_for_user")
    parser.add_argument("--replay-events", type=int, default=500)
    args = parser.parse_args()

    setup_django()
    import django
    from django.conf import settings
    from django.db import connection

    # DEBUG=1 only spares the bench a SECRET_KEY; with it on, every query would also be logged in
    # memory, which skews the timings (CaptureQueriesContext still counts where it is asked to).
    settings.DEBUG = False
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        bench_dir = Path(settings.VAR_DIR) / "bench"
        bench_dir.mkdir(parents=True, exist_ok=True)
        db.setdefault("TEST", {})["NAME"] = str(bench_dir / "bench.sqlite3")  # a file, like the real thing
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    where = db["NAME"] if connection.vendor == "sqlite" else f"{connection.vendor} database {db['NAME']}"
    print(f"Arbiter bench — {where}")
    print(f"Django {django.get_version()}, Python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs\n")
    started = time.perf_counter()
    try:
        bench = Bench(args)
        rows = [
            ("audit_record, 1 stream", bench.audit_appends(streams=1)),
            ("audit_record, 50 streams", bench.audit_appends(streams=50)),
        ]
        if connection.vendor == "postgresql":
            rows += [("audit_record, 4 threads, 1 stream", bench.audit_concurrent(streams=1)),
                     ("audit_record, 4 threads, 4 streams", bench.audit_concurrent(streams=4))]
        for label, value in rows:
            print(f"{label:<38} {value}", flush=True)
        print(f"{'case_create':<38} {bench.case_create_rate()}", flush=True)
        for line in bench.case_list():
            print(f"{f'case_list_for_user ({args.list_cases} cases)':<38} {line}", flush=True)
        print(f"{'case_replay':<38} {bench.case_replay()}", flush=True)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    print(f"\n(total {time.perf_counter() - started:.1f} s; the throwaway database was removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
