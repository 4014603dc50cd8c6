"""Every domain metric of Arbiter, defined in one place (Prometheus, via prometheus_client).

The services and the executor call the small functions below with one line each; the objects are
module-level so a process registers each exactly once. Exposed with django-prometheus's request,
database and cache metrics at /metrics (ops.views.metrics: operators only). With several
processes (gunicorn workers, the Celery worker) set PROMETHEUS_MULTIPROC_DIR to a directory they
share (`make serve` does): prometheus_client then aggregates across them.

Labels are bounded sets (graph names, agents, tool names, outcomes), never ids."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RUNS_STARTED = Counter("arbiter_runs_started_total", "Agent runs started", ["graph"])
RUNS_FINISHED = Counter("arbiter_runs_finished_total", "Agent runs that reached a final status",
                        ["graph", "status"])  # status: completed, failed, cancelled
STEP_SECONDS = Histogram("arbiter_run_step_seconds", "Wall time of one run step (claim to commit)",
                         ["graph", "outcome"],
                         buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
MODEL_TOKENS = Counter("arbiter_model_tokens_total", "Tokens sent to and received from models",
                       ["agent", "kind"])  # kind: prompt, completion
TOOL_SECONDS = Histogram("arbiter_tool_seconds", "Latency of agent tool executions", ["tool", "outcome"],
                         buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
LEASE_EXPIRIES = Counter("arbiter_run_lease_expiries_total", "Run leases found expired and reaped")
OUTBOX_LAG = Gauge("arbiter_outbox_lag_seconds", "Age of the oldest undelivered outbox message",
                   multiprocess_mode="max")
BEAT_HEARTBEAT_AGE = Gauge("arbiter_beat_heartbeat_age_seconds",
                           "Seconds since Celery beat was last seen (-1: never seen)", multiprocess_mode="max")
APPROVALS = Counter("arbiter_approvals_total", "Decisions on proposals and notices", ["kind", "decision"])
DISPATCHES = Counter("arbiter_notice_dispatches_total", "Notice send attempts", ["outcome"])
DEADLINE_CROSSINGS = Counter("arbiter_deadline_crossings_total", "Case deadlines found crossed", ["rule"])
LOGIN_LOCKOUTS = Counter("arbiter_login_lockouts_total", "Logins locked out after repeated failures")


def run_started(*, graph: str) -> None:
    RUNS_STARTED.labels(graph=graph or "unknown").inc()


def run_finished(*, graph: str, status: str) -> None:
    RUNS_FINISHED.labels(graph=graph or "unknown", status=status).inc()


def step_observed(*, graph: str, outcome: str, seconds: float) -> None:
    STEP_SECONDS.labels(graph=graph or "unknown", outcome=outcome).observe(max(seconds, 0.0))


def model_tokens(*, agent: str, prompt: int, completion: int) -> None:
    MODEL_TOKENS.labels(agent=agent, kind="prompt").inc(max(int(prompt or 0), 0))
    MODEL_TOKENS.labels(agent=agent, kind="completion").inc(max(int(completion or 0), 0))


def tool_observed(*, tool: str, outcome: str, seconds: float) -> None:
    TOOL_SECONDS.labels(tool=tool, outcome=outcome).observe(max(seconds, 0.0))


def leases_expired(count: int) -> None:
    if count:
        LEASE_EXPIRIES.inc(count)


def outbox_lag(seconds: float) -> None:
    OUTBOX_LAG.set(max(seconds, 0.0))


def beat_heartbeat_age(seconds: float) -> None:
    BEAT_HEARTBEAT_AGE.set(seconds)


def decision(*, kind: str, decision: str) -> None:
    """kind: proposal or notice; decision: approved or rejected."""
    APPROVALS.labels(kind=kind, decision=decision).inc()


def dispatch(*, outcome: str) -> None:
    """outcome: sent, failed, skipped ..."""
    DISPATCHES.labels(outcome=outcome).inc()


def deadline_crossed(*, rule: str) -> None:
    DEADLINE_CROSSINGS.labels(rule=rule).inc()


def login_locked_out() -> None:
    LOGIN_LOCKOUTS.inc()
