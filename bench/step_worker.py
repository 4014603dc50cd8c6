#!/usr/bin/env python
"""One worker process of the step benchmark (bench/steps.py starts each in its own session).

    step_worker.py arbiter  DATABASE_URL N LABEL [ARBITER_ROOT]   (the project's venv)
    step_worker.py floor    DATABASE_URL N LABEL                  (any venv with psycopg)
    step_worker.py langgraph DATABASE_URL N LABEL                 (the benchmark's own venv)
    step_worker.py langgraph-setup DATABASE_URL

Each does its setup, prints "ready", waits for a line on stdin, runs one run of N steps of the
null graph (one node looping N times, appending ~500 bytes per step) and prints one JSON line:
{"steps", "seconds", "cpu_seconds", "run"}. Nothing here asserts: it measures.

With BENCH_WARMUP_STEPS=K (> 0) in the environment, each first runs a separate run of K steps,
untimed, before it prints "ready": what a long-lived worker process pays once (imports done on
first use, SQL built and statements prepared, caches filled) is then not counted in the timed run,
for every competitor alike. What each run pays (Arbiter: admission, the lease claim, the first
state load; LangGraph: a new thread) still is."""

import json
import operator
import os
import sys
import time
from typing import Annotated, TypedDict

PAYLOAD = "x" * 493


class LangGraphState(TypedDict):
    count: int
    log: Annotated[list[str], operator.add]


def _warmup_steps() -> int:
    return int(os.environ.get("BENCH_WARMUP_STEPS", "0") or 0)


def _flush_stats(execute) -> None:
    """Have this backend report its statistics now (PostgreSQL 15+): otherwise the warm-up's last
    commits may be reported up to 10 s later, inside the timed run's counts."""
    execute("SELECT pg_stat_force_next_flush()")


def _wait_for_go() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


def _report(steps: int, started: float, cpu_started: float, run) -> None:
    print(json.dumps({"steps": steps, "seconds": time.perf_counter() - started,
                      "cpu_seconds": time.process_time() - cpu_started, "run": run}), flush=True)


def arbiter(url: str, n: int, label: str, root: str) -> None:
    sys.path.insert(0, root)
    os.chdir(root)
    os.environ.update({"DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1",
                       "ARBITER_TENANT_MAX_CONCURRENT_RUNS": "64", "LOG_LEVEL": "WARNING"})
    import django

    django.setup()
    from django.conf import settings

    settings.DEBUG = False  # DEBUG=1 only spares a SECRET_KEY; no query logging in the measurement
    from accounts.models import Tenant
    from core.actors import Actor
    from runs import services
    from runs.executor import drive_inline
    from runs.graph import GRAPHS

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    GRAPHS["bench_null"] = "null_graph:GRAPH"  # bench/null_graph.py (this directory)
    from accounts.models import Role, User
    from cases.services import case_create

    tenant = Tenant.objects.get(slug="bench")
    # Each run on its own case, as analysis runs are: its audit events chain in the case's stream
    # (runs of one tenant without a case would all queue on the tenant stream's head lock).
    analyst, _ = User.objects.get_or_create(username=f"bench-{label}", defaults={"tenant": tenant,
                                                                                 "role": Role.ANALYST})

    def start(steps: int, reference: str):
        case = case_create(actor=analyst, tenant=tenant, title=f"Bench {reference}", narrative="Null graph.",
                           product="Credit card", issue="Billing", company="Example Bank",
                           complainant_email="bench@example.org", source="bench", source_reference=reference)
        return services.run_start(actor=Actor.system("bench"), case=case, graph="bench_null", input={"n": steps},
                                  budget={"max_steps": steps + 1, "max_tokens": 10**9, "max_wall_seconds": 86400},
                                  enqueue=False)

    if _warmup_steps():
        warmup = start(_warmup_steps(), f"{label}-warmup")
        drive_inline(run_id=warmup.pk, worker_id=f"bench:{label}-warmup", timeout_seconds=600)
        from django.db import connection

        with connection.cursor() as cursor:
            _flush_stats(cursor.execute)
    run = start(n, label)
    _wait_for_go()
    started, cpu = time.perf_counter(), time.process_time()
    done = drive_inline(run_id=run.pk, worker_id=f"bench:{label}", timeout_seconds=3600)
    _report(done.steps_used, started, cpu, done.pk)


def floor(url: str, n: int, label: str) -> None:
    import psycopg

    conn = psycopg.connect(url)

    def start(reference: str) -> int:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO bench_floor_run (label, sequence) VALUES (%s, 0) RETURNING id", [reference])
            run_id = cur.fetchone()[0]
        conn.commit()
        return run_id

    def steps(run_id: int, count: int) -> None:
        with conn.cursor() as cur:
            for sequence in range(1, count + 1):
                cur.execute("INSERT INTO bench_floor_step (run_id, sequence, payload) VALUES (%s, %s, %s)",
                            [run_id, sequence, f"{sequence:06d} {PAYLOAD}"])
                cur.execute("UPDATE bench_floor_run SET sequence = %s WHERE id = %s", [sequence, run_id])
                conn.commit()

    if _warmup_steps():
        steps(start(f"{label}-warmup"), _warmup_steps())
        with conn.cursor() as cur:
            _flush_stats(cur.execute)
        conn.commit()
    run_id = start(label)
    _wait_for_go()
    started, cpu = time.perf_counter(), time.process_time()
    steps(run_id, n)
    _report(n, started, cpu, run_id)


def _langgraph_app(conn, n: int):
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import END, START, StateGraph

    def node(state: LangGraphState) -> dict:
        count = state["count"] + 1
        return {"count": count, "log": [f"{count:06d} {PAYLOAD}"]}

    def route(state: LangGraphState) -> str:
        return END if state["count"] >= n else "node"

    graph = StateGraph(LangGraphState)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_conditional_edges("node", route)
    return graph.compile(checkpointer=PostgresSaver(conn))


def _langgraph_conn(url: str):
    from psycopg import Connection
    from psycopg.rows import dict_row

    return Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)


def langgraph(url: str, n: int, label: str) -> None:
    conn = _langgraph_conn(url)
    if _warmup_steps():
        _langgraph_app(conn, _warmup_steps()).invoke(
            {"count": 0, "log": []}, {"configurable": {"thread_id": f"bench-{label}-warmup-{os.getpid()}-{time.time_ns()}"},
                                      "recursion_limit": _warmup_steps() + 10}, durability="sync")
        _flush_stats(conn.execute)
    app = _langgraph_app(conn, n)
    thread_id = f"bench-{label}-{os.getpid()}-{time.time_ns()}"
    _wait_for_go()
    started, cpu = time.perf_counter(), time.process_time()
    result = app.invoke({"count": 0, "log": []}, {"configurable": {"thread_id": thread_id}, "recursion_limit": n + 10},
                        durability="sync")
    _report(result["count"], started, cpu, thread_id)


def langgraph_setup(url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with _langgraph_conn(url) as conn:
        PostgresSaver(conn).setup()
    from importlib.metadata import version

    import langgraph  # noqa: F401

    print(json.dumps({"langgraph": version("langgraph"),
                      "langgraph-checkpoint-postgres": version("langgraph-checkpoint-postgres")}), flush=True)


if __name__ == "__main__":
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "langgraph-setup":
        langgraph_setup(url)
    elif mode == "arbiter":
        arbiter(url, int(sys.argv[3]), sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else
                os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    elif mode == "floor":
        floor(url, int(sys.argv[3]), sys.argv[4])
    elif mode == "langgraph":
        langgraph(url, int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(f"unknown mode {mode!r}")
