#!/usr/bin/env python
"""The supervisor's dashboard at 100,000 cases. It prints, it never asserts.

Seeds one tenant on PostgreSQL with N cases (default 100,000) received over the last two years —
most older ones decided or closed, notices sent (some late, some edited before approval), decisions,
agent proposals in every outcome, disputes — then rebuilds the dashboard's facts
(`reports.services.dashboard_refresh`, timed) and requests the dashboard, with and without
filters, N times each as a supervisor (Django's test client, no instrumented templates), printing
p50 / p95 and the query count. Target: p95 under 300 ms at 100,000 cases.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench_dashboard .venv/bin/python bench/dashboard.py

The database named in DATABASE_URL is the benchmark's own (migrated, seeded once and kept;
--reseed starts over). Seeding writes through SQL (generate_series), not the services, to reach the
size in a minute; the rows follow the services' rules (due dates from the default policy, the stored
next due date, one decide event per settled case).

Options: --cases N, --repeat N (requests per variant, default 50), --reseed, --no-refresh (measure the
facts as they are), --explain (EXPLAIN ANALYZE every query of each variant, slowest first, instead of
timing the pages).
Each variant's line gives, beside p50 / p95, the median time spent in the database (the queries'
own durations as Django records them), so the rest is Python: the view, the template, the charts.

To alternate the code before and after a change in one run, export the older tree
(`git archive <commit> | tar -x -C DIR`), copy this script into DIR/bench/, and run both with
--no-refresh against the same database in turns."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUG = "bench-dashboard"
TEAMS = ["Cards", "Mortgages", "Loans", "Debt collection", "Credit reporting", "Banking", "", "Cards", "Loans",
         "Banking"]
PRODUCTS = ["Credit card", "Mortgage", "Vehicle loan or lease", "Debt collection", "Credit reporting",
            "Checking or savings account", "Student loan", "Money transfer"]
OPEN = ["new", "triaged", "under_review", "waiting_for_evidence", "ready_for_decision"]
KINDS = ["risk_level", "status_transition", "assignment"]
PROPOSAL_STATUSES = ["applied", "applied", "applied", "rejected", "stale", "withdrawn", "applied", "rejected"]
RESOLUTIONS = ["Raised to high: policy minimums prevail over the assessed level.",
               "Needs an analyst: product and issue are left out of notices until an analyst confirms them.",
               "Unresolved: the evidence does not settle it.",
               "The adjudicator's level (medium) is proposed; both findings are kept."]
ANALYSTS = 20


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()


def seed(cases: int) -> float:
    from django.db import connection, transaction

    from accounts.models import Role, Tenant, User

    started = time.perf_counter()
    with transaction.atomic():
        tenant = Tenant.objects.create(name="Bench dashboard", slug=SLUG)
        User.objects.create_user(f"{SLUG}-supervisor", password="bench", tenant=tenant, role=Role.SUPERVISOR)
        analysts = [User.objects.create_user(f"{SLUG}-analyst{i}", password="bench", tenant=tenant,
                                             role=Role.ANALYST).pk for i in range(ANALYSTS)]
        with connection.cursor() as cursor:
            _seed_cases(cursor, tenant.pk, cases, analysts)
            _seed_outputs(cursor, tenant.pk, analysts[0])
    return time.perf_counter() - started


def _seed_cases(cursor, tenant_id: int, cases: int, analysts: list[int]) -> None:
    # Received over the last 730 days; a case older than 90 days is settled 9 times in 10.
    cursor.execute("""
        INSERT INTO cases_case (tenant_id, reference, title, product, sub_product, issue, sub_issue, company,
            consumer_state, tags, complainant_name, complainant_email, source, source_reference, received_at,
            status, risk_level, assigned_team, assignee_id, resolution, version, created_at, updated_at)
        SELECT %s, 'CASE-B-' || lpad(g::text, 6, '0'), 'Complaint ' || g, (%s::text[])[1 + g %% 8], '',
               'Issue ' || (g %% 40), '', 'Company ' || (g %% 300), 'CA', '', 'Consumer ' || g,
               'consumer' || g || '@example.org', 'bench', '', CURRENT_DATE - (g %% 730),
               CASE WHEN (g %% 730) > 90 AND g %% 10 <> 0 THEN (ARRAY['decided', 'closed'])[1 + g %% 2]
                    ELSE (%s::text[])[1 + g %% 5] END,
               'medium', (%s::text[])[1 + (g / 3) %% 10],
               CASE WHEN g %% 11 = 0 THEN NULL ELSE (%s::int[])[1 + (g / 7) %% %s] END,
               '', 2, now() - (g %% 730) * interval '1 day', now()
        FROM generate_series(1, %s) g
    """, [tenant_id, PRODUCTS, OPEN, TEAMS, analysts, len(analysts), cases])
    cursor.execute("UPDATE cases_case SET acknowledge_due = received_at + 15, response_due = received_at + 15, "
                   "close_due = received_at + 60 WHERE tenant_id = %s", [tenant_id])
    # A notice for 6 cases in 7: sent (on time, or late for one in 9) for settled cases and most open
    # ones; drafted by an agent for 7 in 10, edited before approval for one in 4 of those.
    cursor.execute("""
        INSERT INTO cases_notice (tenant_id, case_id, kind, recipient, subject, body, content_hash, status,
            drafted_by, last_edited_by, submitted_by, requested_by, run_id, idempotency_key, version, sent_at,
            external_message_id, created_at, updated_at, consumer_request, check_flags, checked_hash)
        SELECT c.tenant_id, c.id, 'response', c.complainant_email, 'About your complaint ' || c.reference,
               'We received your complaint.', md5(c.reference) || md5(c.title),
               CASE WHEN c.id %% 13 = 0 THEN (ARRAY['pending_approval', 'rejected', 'withdrawn', 'draft'])[1 + c.id %% 4]
                    ELSE 'sent' END,
               CASE WHEN c.id %% 10 < 7 THEN 'agent:notice_drafter@1' ELSE 'user:' || COALESCE(c.assignee_id, 0) END,
               'user:' || COALESCE(c.assignee_id, 0), '', '', '', NULL, 1 + (c.id %% 4 = 0)::int,
               CASE WHEN c.id %% 13 <> 0 THEN (c.received_at + (CASE WHEN c.id %% 9 = 0 THEN 20 ELSE 3 + c.id %% 10 END)::int + time '12:00')::timestamptz END,
               '', c.created_at, c.updated_at, '', '[]'::jsonb, ''
        FROM cases_case c WHERE c.tenant_id = %s AND c.id %% 7 <> 0
    """, [tenant_id])
    cursor.execute("""
        INSERT INTO cases_caseevent (tenant_id, case_id, sequence, event_type, payload, case_version,
            actor_type, actor_id, run_id, policy_version, created_at)
        SELECT c.tenant_id, c.id, 1, 'case.created', jsonb_build_object('title', c.title), 1, 'user', 'user:1', '',
               '2026.11.2', c.created_at
        FROM cases_case c WHERE c.tenant_id = %s
    """, [tenant_id])
    # The decision: 10 to 89 days after receipt (some after the 60-day due date).
    cursor.execute("""
        INSERT INTO cases_caseevent (tenant_id, case_id, sequence, event_type, payload, case_version,
            actor_type, actor_id, run_id, policy_version, created_at)
        SELECT c.tenant_id, c.id, 2, 'case.transitioned',
               jsonb_build_object('transition', 'decide', 'source', 'ready_for_decision', 'target', 'decided'),
               2, 'user', 'user:1', '', '2026.11.2', (c.received_at + (10 + c.id %% 80)::int + time '12:00')::timestamptz
        FROM cases_case c WHERE c.tenant_id = %s AND c.status IN ('decided', 'closed')
    """, [tenant_id])
    cursor.execute("""
        UPDATE cases_case c SET next_due = LEAST(
            CASE WHEN EXISTS (SELECT 1 FROM cases_notice n WHERE n.case_id = c.id AND n.status = 'sent')
                 THEN NULL ELSE LEAST(c.acknowledge_due, c.response_due) END,
            CASE WHEN c.status IN ('decided', 'closed') THEN NULL ELSE c.close_due END)
        WHERE c.tenant_id = %s
    """, [tenant_id])


def _seed_outputs(cursor, tenant_id: int, analyst_id: int) -> None:
    # Agent proposals: three for two cases in three, every kind and outcome.
    cursor.execute("""
        INSERT INTO cases_proposal (tenant_id, case_id, kind, payload, rationale, evidence_refs, proposer_type,
            proposer_id, requested_by, run_id, idempotency_key, case_version, policy_version, status,
            decided_at, decision_note, created_at, decided_by_id, proposed_by_user_id, preconditions, stale_reason)
        SELECT c.tenant_id, c.id, (%s::text[])[1 + k], '{}'::jsonb, 'Assessed.', '[]'::jsonb, 'agent',
               (ARRAY['agent:proposer@1', 'agent:proposer@2'])[1 + c.id %% 2], '', '', NULL, 1, '2026.11.2',
               CASE WHEN c.status IN ('decided', 'closed') THEN (%s::text[])[1 + (c.id + k) %% 8]
                    ELSE (ARRAY['pending', 'applied', 'stale'])[1 + (c.id + k) %% 3] END,
               NULL, '', c.created_at, NULL, NULL, '{}'::jsonb, '{}'::jsonb
        FROM cases_case c CROSS JOIN generate_series(0, 2) k WHERE c.tenant_id = %s AND c.id %% 3 <> 0
    """, [KINDS, PROPOSAL_STATUSES, tenant_id])
    cursor.execute("""
        INSERT INTO runs_agentrun (tenant_id, case_id, graph, graph_version, input, status, phase, current_node,
            next_sequence, retry_counts, max_steps, max_tokens, max_wall_seconds, steps_used, tokens_used, error,
            error_code, wait_reason, started_by, provider_name, model_name, prompt_versions, version, queued_at,
            started_at, finished_at, created_at, updated_at, started_by_user_id, state_hash)
        SELECT c.tenant_id, c.id, 'case_analysis', '1', '{}'::jsonb, 'completed', 'done', '', 9, '{}'::jsonb, 50,
               100000, 600, 8, 0, '', '', '', 'user:' || %s, 'offline', '', '{}'::jsonb, 1, c.created_at,
               c.created_at, c.created_at, c.created_at, c.created_at, %s, ''
        FROM cases_case c WHERE c.tenant_id = %s AND c.id %% 4 = 0
    """, [analyst_id, analyst_id, tenant_id])
    cursor.execute("""
        INSERT INTO runs_artifact (tenant_id, case_id, run_id, step_id, kind, content, content_hash, source_refs,
            schema_version, produced_by, copied_from_id, created_at)
        SELECT r.tenant_id, r.case_id, r.id, NULL, 'dispute',
               jsonb_build_object('topic', 'risk level', 'positions', jsonb_build_array('a', 'b'),
                                  'resolution', (%s::text[])[1 + r.id %% 4]),
               md5(r.id::text) || md5(r.id::text), '{}'::jsonb, 1, 'agent:adjudicator@1', NULL, r.created_at
        FROM runs_agentrun r WHERE r.tenant_id = %s AND r.id %% 2 = 0
    """, [RESOLUTIONS, tenant_id])
    cursor.execute("ANALYZE")


def variants() -> list[tuple[str, str]]:
    last = (date.today().replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    return [
        ("no filter", "/dashboard/"),
        ("team", "/dashboard/?team=Cards"),
        ("product", "/dashboard/?product=Mortgage"),
        ("month", f"/dashboard/?month={last}"),
        ("team + product + month", f"/dashboard/?team=Loans&product=Student+loan&month={last}"),
        ("CSV export, no filter", "/dashboard/export.csv"),
    ]


def measure(repeat: int) -> list[tuple]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from accounts.models import User

    client = Client()
    client.force_login(User.objects.get(username=f"{SLUG}-supervisor"))
    rows = []
    for name, url in variants():
        client.get(url)  # warm: templates, plans
        times, in_database = [], []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as queries:
                start = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - start) * 1000)
            in_database.append(1000 * sum(float(query["time"]) for query in queries.captured_queries))
        times.sort()
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        rows.append((name, statistics.median(times), p95, statistics.median(in_database), len(queries),
                     response.status_code))
    return rows


def explain(url: str, top: int) -> None:
    """Every query of one request, EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL, slowest first."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from accounts.models import User

    client = Client()
    client.force_login(User.objects.get(username=f"{SLUG}-supervisor"))
    client.get(url)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    plans = []
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
            lines = [row[0] for row in cursor.fetchall()]
            took = float(lines[-1].rsplit(" ", 2)[-2])  # "Execution Time: 12.345 ms"
            plans.append((took, sql, lines))
    plans.sort(key=lambda plan: -plan[0])
    print(f"\n== {url}: {len(plans)} selects, {sum(p[0] for p in plans):.1f} ms executing in all")
    for took, sql, lines in plans[:top]:
        print(f"\n-- {took:.1f} ms: {sql[:300]}")
        print("\n".join(lines))
    for took, sql, _lines in plans[top:]:
        print(f"-- {took:.1f} ms: {sql[:160]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--no-refresh", action="store_true")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--top", type=int, default=4, help="full plans shown per variant with --explain")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        print("Set DATABASE_URL to a PostgreSQL database of the benchmark's own (it is seeded with 100,000 cases).")
        return 2
    setup_django()
    import logging

    logging.disable(logging.INFO)
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", verbosity=0)
    from accounts.models import Tenant
    from cases.models import Case
    from reports.services import dashboard_refresh

    if args.reseed:
        with connection.cursor() as cursor:
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> "
                           "'django_migrations' AND tablename NOT LIKE 'django_content%%' "
                           "AND tablename NOT LIKE 'auth_permission%%'")
            tables = [row[0] for row in cursor.fetchall()]
            cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    if not Tenant.objects.filter(slug=SLUG).exists():
        print(f"seeded {args.cases:,} cases in {seed(args.cases):.1f} s")
    tenant = Tenant.objects.get(slug=SLUG)
    print(f"{Case.objects.filter(tenant=tenant).count():,} cases")
    for attempt in () if args.no_refresh else (1, 2):  # the second shows it is the same work again
        refresh = dashboard_refresh(tenant_id=tenant.pk)
        print(f"refresh {attempt}: {refresh.cases:,} case facts in {refresh.duration_ms / 1000:.1f} s")
    # VACUUM, not only ANALYZE: what autovacuum does to a table in production soon after a bulk
    # write (the seed's updates, a refresh's delete and insert). Without it no page of the case table
    # is marked all-visible, so the partial covering index cannot answer alone (every index-only
    # scan fetches from the table) and the dead rows are scanned too: the live queries take about
    # three times as long. The shared benchmark server runs with autovacuum off.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"load average: {' / '.join(f'{load:.1f}' for load in os.getloadavg())}")
    if args.explain:
        for _name, url in variants():
            explain(url, args.top)
        return 0
    print(f"\n{'variant':<28} {'p50 ms':>8} {'p95 ms':>8} {'db p50':>8} {'queries':>8} {'status':>7}"
          f"   (n={args.repeat})")
    for name, p50, p95, database, queries, status in measure(args.repeat):
        print(f"{name:<28} {p50:>8.1f} {p95:>8.1f} {database:>8.1f} {queries:>8} {status:>7}")
    print(f"load average: {' / '.join(f'{load:.1f}' for load in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
