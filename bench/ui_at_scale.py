#!/usr/bin/env python
"""The browser UI and the main API lists at size. It prints, it never asserts.

Seeds two tenants on PostgreSQL — "small" (100 cases) and "large" (100,000 cases, about
1,000,000 audit events, ~3,000 pending proposals, a run of 1,000 steps) — then requests every page
a working day uses, as the person who would use it, and prints p50 / p95 and the query count of
each at both sizes. Target: p95 under 150 ms for every one at the large size, and the
same query count at both sizes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_ui_at_scale .venv/bin/python bench/ui_at_scale.py

The database named in DATABASE_URL is the benchmark's own: it is migrated, seeded once (kept for
later runs; --reseed starts over) and never used for anything else. Seeding writes through SQL
(generate_series and COPY), not the services, to reach the size in minutes; what it writes is
valid: every audit stream is a correct hash chain with its head row (`audit_verify` passes), the
case events replay to the case rows' status, and the append-only triggers are never asked to
update or delete (only inserts).

Options: --large N (cases, default 100000), --events-per-case N (default 10), --repeat N
(requests per page, default 20), --only NAME (pages whose name contains it), --reseed."""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL, LARGE = "bench-small", "bench-large"
ACTIONS = [  # (action, actor kind, decision): a case's audit stream, cycled
    ("cases.case.created", "user", ""), ("cases.evidence.added", "user", ""),
    ("runs.run.started", "user", ""), ("runs.step.completed", "agent", ""), ("runs.tool.called", "agent", "allowed"),
    ("cases.proposal.created", "agent", ""), ("cases.case.transitioned", "user", "allowed"),
    ("cases.proposal.approved", "user", "approved"), ("cases.notice.drafted", "user", ""),
    ("cases.notice.submitted", "user", ""), ("cases.notice.approved", "user", "approved"),
    ("runs.run.completed", "system", ""),
]
STATUSES = ["new", "triaged", "under_review", "waiting_for_evidence", "ready_for_decision", "decided", "closed"]
RISKS = ["unassessed", "low", "medium", "high", "critical"]
NODES = ["triage", "retrieve", "policy_checker", "risk_assessor", "proposer", "notice_drafter", "critic", "reflect"]


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()


def narratives() -> list[tuple[str, str, str]]:
    path = ROOT / "cases" / "demo_data" / "cfpb_complaints_sample.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [(r["Product"], r["Company"], r["Consumer complaint narrative"]) for r in csv.DictReader(handle)]
    return [r for r in rows if r[2].strip()] or [("Credit card", "Example Bank", "I was charged twice.")]


def copy_rows(cursor, table: str, columns: list[str], rows) -> None:
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


# --- seeding ------------------------------------------------------------------------------------------

def seed_tenant(*, slug: str, cases: int, events_per_case: int, pending: int, long_run_steps: int) -> None:
    from django.db import connection, transaction
    from django.utils import timezone

    from accounts.models import Role, Tenant, User
    from audit.hashing import current_key_id, event_hash

    started = time.perf_counter()
    with transaction.atomic():
        tenant = Tenant.objects.create(name=f"Bench {slug}", slug=slug)
        people = {role: User.objects.create_user(f"{slug}-{role}", password="bench", tenant=tenant, role=role)
                  for role in (Role.ANALYST, Role.SUPERVISOR, Role.AUDITOR)}
        other = User.objects.create_user(f"{slug}-analyst2", password="bench", tenant=tenant, role=Role.ANALYST)
        analyst, supervisor = people[Role.ANALYST], people[Role.SUPERVISOR]
        texts = narratives()
        with connection.cursor() as cursor:
            raw = cursor.cursor
            cursor.execute("CREATE TEMP TABLE bench_narrative (i int, product text, company text, body text) "
                           "ON COMMIT DROP")
            copy_rows(raw, "bench_narrative", ["i", "product", "company", "body"],
                      ((i, p, c, b) for i, (p, c, b) in enumerate(texts)))
            n_texts = len(texts)
            cursor.execute(f"""
                INSERT INTO cases_case (tenant_id, reference, title, product, sub_product, issue, sub_issue, company,
                    consumer_state, tags, complainant_name, complainant_email, source, source_reference, received_at,
                    status, risk_level, assigned_team, assignee_id, resolution, version, created_at, updated_at)
                SELECT %s, 'CASE-2026-' || lpad(g::text, 6, '0'),
                       left(n.product, 60) || ' complaint ' || g, n.product, '', 'Issue ' || (g %% 40), '', n.company,
                       'CA', CASE WHEN g %% 17 = 0 THEN 'Servicemember' WHEN g %% 23 = 0 THEN 'Older American' ELSE '' END,
                       'Consumer ' || g, 'consumer' || g || '@example.org', 'bench', '',
                       DATE '2026-01-01' + (g %% 300),
                       (%s::text[])[1 + g %% 7], (%s::text[])[1 + (g / 7) %% 5], '',
                       CASE WHEN g %% 3 = 0 THEN %s WHEN g %% 3 = 1 THEN %s ELSE NULL END, '', 2,
                       now() - (%s - g) * interval '37 seconds', now() - (%s - g) * interval '29 seconds'
                FROM generate_series(1, %s) g JOIN bench_narrative n ON n.i = g %% {n_texts}
            """, [tenant.pk, STATUSES, RISKS, analyst.pk, other.pk, cases, cases, cases])
            # Due dates as the default deadline policy sets them from the received date (calendar days).
            cursor.execute("UPDATE cases_case SET acknowledge_due = received_at + 15, response_due = received_at + 15, "
                           "close_due = received_at + 60 WHERE tenant_id = %s", [tenant.pk])
            cursor.execute("""
                INSERT INTO cases_evidence (tenant_id, case_id, kind, title, text, file, filename, content_type, size,
                    sha256, source, added_by, created_at)
                SELECT c.tenant_id, c.id, 'text', 'Complaint narrative', n.body, '', '', 'text/plain',
                       octet_length(n.body), md5(n.body) || md5(n.body), 'bench', 'user:' || %s, c.created_at
                FROM cases_case c JOIN bench_narrative n ON n.i = c.id %% %s WHERE c.tenant_id = %s
            """, [analyst.pk, n_texts, tenant.pk])
            cursor.execute("""
                INSERT INTO cases_caseevent (tenant_id, case_id, sequence, event_type, payload, case_version,
                    actor_type, actor_id, run_id, policy_version, created_at)
                SELECT c.tenant_id, c.id, s.seq, s.kind,
                       CASE WHEN s.seq = 1 THEN jsonb_build_object('title', c.title, 'reference', c.reference)
                            ELSE jsonb_build_object('title', 'Complaint narrative', 'size', 100) END,
                       s.seq, 'user', 'user:' || %s, '', '2026.11.1', c.created_at
                FROM cases_case c CROSS JOIN (VALUES (1, 'case.created'), (2, 'evidence.added')) AS s(seq, kind)
                WHERE c.tenant_id = %s
            """, [analyst.pk, tenant.pk])
            # Pending proposals (the review inbox), some decided ones, notices in every state that matters.
            cursor.execute("""
                INSERT INTO cases_proposal (tenant_id, case_id, kind, payload, rationale, evidence_refs, proposer_type,
                    proposer_id, requested_by, run_id, idempotency_key, case_version, policy_version, status,
                    decided_at, decision_note, created_at, decided_by_id, proposed_by_user_id, preconditions,
                    stale_reason)
                SELECT c.tenant_id, c.id, 'risk_level', jsonb_build_object('risk_level', 'high'),
                       'The narrative reports a loss above $1,000 (rule MONEY-LOSS).', '[]'::jsonb, 'agent',
                       'agent:risk_assessor@1.0', '', '', NULL, c.version, '2026.11.1',
                       CASE WHEN c.id %% 3 = 0 THEN 'applied' ELSE 'pending' END,
                       CASE WHEN c.id %% 3 = 0 THEN now() END, '', c.created_at + interval '1 hour',
                       CASE WHEN c.id %% 3 = 0 THEN %s END, NULL, jsonb_build_object('risk_level', c.risk_level),
                       '{}'::jsonb
                FROM cases_case c WHERE c.tenant_id = %s AND c.id %% %s = 0
            """, [supervisor.pk, tenant.pk, max(1, cases * 2 // (3 * pending))])
            # One notice per `every` cases, its state rotating from one such case to the next, so that a
            # tenant of any size has notices in every inbox section (pending, approved not sent, rejected)
            # and the page's query count is compared like with like.
            every = 101 if cases > 10_000 else 7
            cursor.execute("""
                INSERT INTO cases_notice (tenant_id, case_id, kind, recipient, subject, body, content_hash, status,
                    drafted_by, last_edited_by, submitted_by, requested_by, run_id, idempotency_key, version, sent_at,
                    external_message_id, created_at, updated_at, consumer_request, check_flags, checked_hash)
                SELECT c.tenant_id, c.id, 'response', c.complainant_email, 'About your complaint ' || c.reference,
                       'We received your complaint and will answer within 15 days.', md5(c.reference) || md5(c.title),
                       (ARRAY['pending_approval', 'approved', 'rejected', 'sent'])[1 + (c.id / %s) %% 4],
                       'user:' || %s, 'user:' || %s, 'user:' || %s, '', '', NULL, 1,
                       CASE WHEN (c.id / %s) %% 4 = 3 THEN now() END, '', c.created_at, c.updated_at, '', '[]'::jsonb, ''
                FROM cases_case c WHERE c.tenant_id = %s AND c.id %% %s = 0
            """, [every, analyst.pk, analyst.pk, analyst.pk, every, tenant.pk, every])
            # The stored next due date, by the rule cases.services.deadlines keeps it:
            # acknowledgement and response until a notice is sent, closure until decided or closed.
            cursor.execute("""
                UPDATE cases_case c SET next_due = LEAST(  -- LEAST skips NULLs on PostgreSQL
                    CASE WHEN EXISTS (SELECT 1 FROM cases_notice n WHERE n.case_id = c.id AND n.status = 'sent')
                         THEN NULL ELSE LEAST(c.acknowledge_due, c.response_due) END,
                    CASE WHEN c.status IN ('decided', 'closed') THEN NULL ELSE c.close_due END)
                WHERE c.tenant_id = %s
            """, [tenant.pk])
            # Runs: one per 10 cases (the run list), each with no steps; and one run of many steps.
            cursor.execute("""
                INSERT INTO runs_agentrun (tenant_id, case_id, graph, graph_version, input, status, phase, current_node,
                    next_sequence, retry_counts, max_steps, max_tokens, max_wall_seconds, steps_used,
                    tokens_used, error, error_code, wait_reason, started_by, provider_name, model_name,
                    prompt_versions, version, queued_at, started_at, finished_at, created_at, updated_at,
                    started_by_user_id, state_hash)
                SELECT c.tenant_id, c.id, 'case_analysis', '1', '{}'::jsonb, 'completed', 'done', '', 9,
                       '{}'::jsonb, 50, 100000, 600, 8, 0, '', '', '', 'user:' || %s, 'offline', '', '{}'::jsonb, 1,
                       c.created_at, c.created_at, c.created_at + interval '1 minute', c.created_at, c.created_at, %s, ''
                FROM cases_case c WHERE c.tenant_id = %s AND c.id %% 10 = 0
            """, [analyst.pk, analyst.pk, tenant.pk])
            cursor.execute("SELECT id, reference FROM cases_case WHERE tenant_id = %s ORDER BY id DESC LIMIT 1",
                           [tenant.pk])
            busy_case_id, _reference = cursor.fetchone()
            now = timezone.now()
            cursor.execute("""
                INSERT INTO runs_agentrun (tenant_id, case_id, graph, graph_version, input, status, phase, current_node,
                    next_sequence, retry_counts, max_steps, max_tokens, max_wall_seconds, steps_used,
                    tokens_used, error, error_code, wait_reason, started_by, provider_name, model_name,
                    prompt_versions, version, queued_at, started_at, finished_at, created_at, updated_at,
                    started_by_user_id, state_hash)
                VALUES (%s, %s, 'case_analysis', '1', '{}'::jsonb, 'completed', 'done', '', %s,
                        '{}'::jsonb, %s, 10000000, 86400, %s, 0, '', '', '', 'user:' || %s, 'offline', '',
                        '{}'::jsonb, 1, %s, %s, %s, %s, %s, %s, '') RETURNING id
            """, [tenant.pk, busy_case_id, long_run_steps + 1, long_run_steps + 10, long_run_steps, analyst.pk,
                  now, now, now, now, now, analyst.pk])
            long_run = cursor.fetchone()[0]
            cursor.execute(f"""
                INSERT INTO runs_step (run_id, sequence, node, attempt, status, outcome, next_node, summary, error,
                    worker_id, tokens, started_at, finished_at, duration_ms)
                SELECT %s, g, (%s::text[])[1 + g %% {len(NODES)}], 1, 'completed',
                       CASE WHEN g = %s THEN 'end' ELSE 'goto' END, (%s::text[])[1 + (g + 1) %% {len(NODES)}],
                       'Step ' || g || ' done.', '', 'bench', 10, now(), now(), 5
                FROM generate_series(1, %s) g
            """, [long_run, NODES, long_run_steps, NODES, long_run_steps])
            cursor.execute("""
                INSERT INTO runs_checkpoint (run_id, step_id, sequence, schema_version, delta, snapshot, state_hash,
                    size_bytes, created_at)
                SELECT s.run_id, s.id, s.sequence, 1, '{}'::jsonb, NULL, md5(s.id::text) || md5(s.id::text), 2, now()
                FROM runs_step s WHERE s.run_id = %s
            """, [long_run])
            # The audit ledger: one hash chain per case, ~events_per_case events each, with its head.
            cursor.execute("SELECT id, created_at FROM cases_case WHERE tenant_id = %s ORDER BY id", [tenant.pk])
            case_rows = cursor.fetchall()

            class Event:  # the fields audit.hashing reads
                __slots__ = ("tenant_id", "stream", "sequence", "actor_type", "actor_id", "action", "target_type",
                             "target_id", "run_id", "policy_version", "decision", "evidence_refs", "payload",
                             "prev_hash", "created_at")

            heads = []
            people_ids = {"user": f"user:{analyst.pk}", "agent": "agent:risk_assessor@1.0", "system": "system:worker"}

            def audit_rows():
                event = Event()
                event.key_id = current_key_id()  # keyed like the ledger's own events (ADR 0017)
                event.tenant_id, event.target_type, event.policy_version = tenant.pk, "case", "2026.11.1"
                event.evidence_refs, event.run_id = [], ""
                for case_id, created in case_rows:
                    prev, stream = "", f"case:{case_id}"
                    for seq in range(1, events_per_case + 1):
                        action, kind, decision = ACTIONS[(seq - 1) % len(ACTIONS)]
                        event.stream, event.sequence, event.actor_type = stream, seq, kind
                        event.actor_id, event.action, event.target_id = people_ids[kind], action, str(case_id)
                        event.decision, event.prev_hash = decision, prev
                        event.payload = {"case_version": seq, "note": "Looks right."} if decision == "approved" \
                            else {"case_version": seq}
                        event.created_at = created + timedelta(minutes=seq)
                        digest = event_hash(event)
                        yield (tenant.pk, stream, seq, kind, event.actor_id, action, "case", str(case_id), "",
                               "2026.11.1", decision, "[]", json.dumps(event.payload), event.created_at, prev, digest,
                               event.key_id)
                        prev = digest
                    heads.append((stream, events_per_case, prev))

            copy_rows(raw, "audit_auditevent",
                      ["tenant_id", "stream", "sequence", "actor_type", "actor_id", "action", "target_type",
                       "target_id", "run_id", "policy_version", "decision", "evidence_refs", "payload", "created_at",
                       "prev_hash", "hash", "key_id"], audit_rows())
            copy_rows(raw, "audit_auditstreamhead", ["stream", "last_sequence", "last_hash"], heads)
        connection.cursor().execute("ANALYZE")
    print(f"  seeded {slug}: {cases} cases, {cases * events_per_case} audit events, "
          f"{time.perf_counter() - started:.0f} s", flush=True)


# --- measuring --------------------------------------------------------------------------------------

def pages(slug: str) -> list[tuple[str, str, str]]:
    """(name, url, who) per page; who is a role of the seeded people."""
    from accounts.models import Tenant, User
    from cases.models import Case
    from runs.models import AgentRun

    tenant = Tenant.objects.get(slug=slug)
    case = Case.objects.filter(tenant=tenant).order_by("-id").first()
    long_run = AgentRun.objects.filter(tenant=tenant).order_by("-steps_used", "-id").first()
    words = "credit report"
    supervisor_pk = User.objects.get(username=f"{slug}-supervisor").pk
    # A keyset page from the middle of the due-date order (page ~2,000 of 4,000 at the large size).
    from cases.models import next_due_sort_key
    from web.keyset import encode_cursor

    middle = (Case.objects.filter(tenant=tenant).annotate(key=next_due_sort_key(descending=False))
              .order_by("key", "pk").values_list("key", "pk")[Case.objects.filter(tenant=tenant).count() // 2])
    return [
        ("queue: all (default sort)", "/", "analyst"),
        ("queue: my cases", "/?view=mine", "analyst"),
        ("queue: needs my decision", "/?view=decide", "supervisor"),
        ("queue: unassigned", "/?view=unassigned", "analyst"),
        ("queue: overdue", "/?view=overdue", "analyst"),
        ("queue: sorted by due date", "/?sort=due", "analyst"),
        ("queue: sorted by due date, latest", "/?sort=-due", "analyst"),
        ("queue: due date, mid-list page", f"/?sort=due&after={encode_cursor(*middle)}", "analyst"),
        ("queue: search two words", f"/?q={words.replace(' ', '+')}", "analyst"),
        ("queue: search a reference", f"/?q={case.reference}", "analyst"),
        ("queue: sorted by risk", "/?sort=-risk", "analyst"),
        ("queue: sorted by received", "/?sort=received", "analyst"),
        ("case page", f"/cases/{case.reference}/", "analyst"),
        ("review inbox", "/review/", "supervisor"),
        ("audit timeline", "/audit/", "auditor"),
        ("audit timeline: everything", "/audit/?scope=all", "auditor"),
        # Filters whose rows are rare (none in the seed): without an index they scan the ledger.
        ("audit timeline: one person", f"/audit/?actor=user:{supervisor_pk}", "auditor"),
        ("audit timeline: a rare action", "/audit/?scope=all&action=cases.notice.sent", "auditor"),
        ("audit timeline: a rare decision", "/audit/?scope=all&decision=rejected", "auditor"),
        ("run list", "/runs/", "analyst"),
        (f"run inspector ({long_run.steps_used} steps)", f"/runs/{long_run.pk}/", "analyst"),
        ("api: cases", "/api/v1/cases/", "analyst"),
        ("api: proposals", "/api/v1/proposals/", "supervisor"),
        ("api: notices", "/api/v1/notices/", "supervisor"),
        ("api: audit events", "/api/v1/audit-events/", "auditor"),
        ("api: audit events, a rare action", "/api/v1/audit-events/?action=cases.notice.sent", "auditor"),
        ("api: runs", "/api/v1/runs/", "analyst"),
    ]


def measure(*, slug: str, repeat: int, only: str) -> dict[str, tuple]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from accounts.models import User

    results = {}
    clients = {}
    for name, url, who in pages(slug):
        if only and only not in name:
            continue
        if who not in clients:
            clients[who] = Client()
            clients[who].force_login(User.objects.get(username=f"{slug}-{who}"))
        client = clients[who]
        client.get(url)  # warm: templates, plans
        times = []
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as queries:
                start = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - start) * 1000)
        times.sort()
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        results[name] = (statistics.median(times), p95, len(queries), response.status_code, len(response.content))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--events-per-case", type=int, default=10)
    parser.add_argument("--steps", type=int, default=1000, help="steps of the long run")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", default="")
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--seed-only", action="store_true")
    parser.add_argument("--instrumented", action="store_true",
                        help="render through django.test's instrumented templates (how the first baseline was taken)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        print("Set DATABASE_URL to a PostgreSQL database of the benchmark's own (it is seeded with 100,000 cases).")
        return 2
    setup_django()
    import logging

    logging.disable(logging.INFO)  # the request log (ops.logging) would drown the table
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    # The test client's host, without django.test's setup_test_environment: that instruments every
    # template render (a signal with a copy of the context), which is not what a real request pays.
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    if args.instrumented:
        from django.test.utils import setup_test_environment

        setup_test_environment()
    call_command("migrate", verbosity=0)
    from accounts.models import Tenant

    if args.reseed:
        with connection.cursor() as cursor:
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> "
                           "'django_migrations' AND tablename NOT LIKE 'django_content%%' "
                           "AND tablename NOT LIKE 'auth_permission%%'")
            tables = [row[0] for row in cursor.fetchall()]
            cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    for slug, size in ((SMALL, args.small), (LARGE, args.large)):
        if not Tenant.objects.filter(slug=slug).exists():
            seed_tenant(slug=slug, cases=size, events_per_case=args.events_per_case,
                        pending=max(1, min(size * 3 // 100, 3000)), long_run_steps=args.steps)
    if args.seed_only:
        return 0
    small = measure(slug=SMALL, repeat=args.repeat, only=args.only)
    large = measure(slug=LARGE, repeat=args.repeat, only=args.only)
    out = io.StringIO()
    header = (f"{'page':<36} {'small p50':>9} {'p95':>7} {'q':>3} | {'large p50':>9} {'p95':>7} {'q':>3} "
              f"{'KB':>6}  {'status'}")
    out.write(f"{args.small} vs {args.large} cases, {args.events_per_case} audit events per case, "
              f"{args.repeat} requests per page (ms)\n{header}\n{'-' * len(header)}\n")
    for name in large:
        s, lg = small.get(name), large[name]
        small_name = name if s else next((n for n in small if n.split(" (")[0] == name.split(" (")[0]), None)
        s = small.get(small_name) if small_name else None
        flags = []
        if lg[1] >= 150:
            flags.append("SLOW")
        if s and s[2] != lg[2]:
            flags.append("QUERIES DIFFER")
        if lg[3] != 200:
            flags.append(f"HTTP {lg[3]}")
        small_cols = f"{s[0]:>9.1f} {s[1]:>7.1f} {s[2]:>3}" if s else f"{'—':>9} {'—':>7} {'—':>3}"
        out.write(f"{name:<36} {small_cols} | {lg[0]:>9.1f} {lg[1]:>7.1f} {lg[2]:>3} {lg[4] / 1024:>6.0f}  "
                  f"{' '.join(flags) or 'ok'}\n")
    print(out.getvalue(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
