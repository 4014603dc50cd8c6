"""The run engine (runs/): budgets, leases and heartbeats, retries, durability, retention, and the
names under which it finds graphs, providers and the context builder."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env_int, env_str

# --- Concurrency and leases -------------------------------------------------------------
ARBITER_TENANT_MAX_CONCURRENT_RUNS = env_int("ARBITER_TENANT_MAX_CONCURRENT_RUNS", 4, minimum=1)
ARBITER_RUN_LEASE_SECONDS = env_int("ARBITER_RUN_LEASE_SECONDS", 120, minimum=1)
# The run engine (runs/) knows graphs, providers and the context builder only by these names; the
# agents and analyst packages supply them. A new graph or provider adds one line here.
ARBITER_GRAPHS = {
    "case_analysis": "agents.graphs.case_analysis:GRAPH",
    "chat": "agents.graphs.chat:GRAPH",
    "thread_compaction": "agents.graphs.chat:COMPACTION_GRAPH",
}
ARBITER_PROVIDERS = {
    "offline": "analyst.provider.OfflineAnalyst",
    "openai": "agents.providers.OpenAICompatibleProvider",
    "openai-compatible": "agents.providers.OpenAICompatibleProvider",
}
ARBITER_CONTEXT_BUILDER = "agents.context.build_context"

# --- Agent runs (runs/, docs/runs-contract.md) ---------------------------------------------
# Default budgets of a run (steps, tokens, wall time; reaching one fails it); run_start may lower or raise them per run.
ARBITER_RUN_MAX_STEPS = env_int("ARBITER_RUN_MAX_STEPS", 40, minimum=1)
ARBITER_RUN_MAX_TOKENS = env_int("ARBITER_RUN_MAX_TOKENS", 200_000, minimum=1)
ARBITER_RUN_MAX_WALL_SECONDS = env_int("ARBITER_RUN_MAX_WALL_SECONDS", 1800, minimum=1)
# A step failing with a retryable provider error is retried this many times, then fails the run.
ARBITER_RUN_MAX_STEP_RETRIES = env_int("ARBITER_RUN_MAX_STEP_RETRIES", 3, minimum=0)
ARBITER_RUN_RETRY_BACKOFF_SECONDS = env_int("ARBITER_RUN_RETRY_BACKOFF_SECONDS", 5, minimum=0)
ARBITER_MEMORY_DEFAULT_TTL_DAYS = env_int("ARBITER_MEMORY_DEFAULT_TTL_DAYS", 180, minimum=1)
ARBITER_REAP_INTERVAL_SECONDS = env_int("ARBITER_REAP_INTERVAL_SECONDS", 3, minimum=1)
# Per-task time limits (seconds): a step holds a lease of ARBITER_RUN_LEASE_SECONDS, so the hard
# limit stays below it plus the reap interval.
ARBITER_RUN_STEP_SOFT_TIME_LIMIT = env_int("ARBITER_RUN_STEP_SOFT_TIME_LIMIT", 110, minimum=1)
ARBITER_RUN_STEP_TIME_LIMIT = env_int("ARBITER_RUN_STEP_TIME_LIMIT", 120, minimum=1)
# Fault injection for the crash tests only: "<tool name>:<marker file>" makes the tool executor
# write the marker and sleep right after that tool's effect, before recording its outcome, so a
# test can SIGKILL the worker at exactly that point. Empty (the default) disables it.
ARBITER_FAULT_PAUSE_AFTER_EFFECT = env_str("ARBITER_FAULT_PAUSE_AFTER_EFFECT", "")
# --- Cheap durability (ADR 0010) ----------------------
# Once the deltas written since the last snapshot or compaction weigh this many bytes, a
# checkpoint also stores their composition (appended items once more, changed keys once): storage
# is a constant number of bytes per step, loading reads the compactions plus at most this much.
ARBITER_CHECKPOINT_COMPACT_BYTES = env_int("ARBITER_CHECKPOINT_COMPACT_BYTES", 16384, minimum=1)
# Runs whose state a worker process keeps between its own steps (a process-local cache).
ARBITER_RUN_STATE_CACHE_SIZE = env_int("ARBITER_RUN_STATE_CACHE_SIZE", 256, minimum=0)
# A worker task keeps executing the steps of its run, holding the lease (one commit per step), for
# up to this many seconds before handing the run back to the broker.
ARBITER_RUN_STEP_SLICE_SECONDS = env_int("ARBITER_RUN_STEP_SLICE_SECONDS", 20, minimum=0)
# While a step runs, its worker renews the run's heartbeat this often; a lease whose heartbeat is
# older than ..._TIMEOUT_SECONDS belongs to a dead worker: another worker may take the run over and
# the reaper re-enqueues it (well before the lease itself expires).
# Defaults: a run resumes well under 20 s after its worker is SIGKILLed mid-step (the trade-off:
# docs/adr/0021-i24-keeps-serving.md).
ARBITER_RUN_HEARTBEAT_SECONDS = env_int("ARBITER_RUN_HEARTBEAT_SECONDS", 2, minimum=1)
ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS = env_int("ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS", 8, minimum=2)
# A running run with no lease whose next step has not started this many seconds after it was handed
# off (its message was lost) is re-enqueued by the reaper: the run row is the step's outbox.
ARBITER_RUN_REENQUEUE_AFTER_SECONDS = env_int("ARBITER_RUN_REENQUEUE_AFTER_SECONDS", 15, minimum=1)
# run_step_task retries on database and broker errors with exponential backoff capped at this many
# seconds, at most ..._MAX_RETRIES times.
ARBITER_TASK_RETRY_BACKOFF_MAX_SECONDS = env_int("ARBITER_TASK_RETRY_BACKOFF_MAX_SECONDS", 5, minimum=1)
ARBITER_TASK_MAX_RETRIES = env_int("ARBITER_TASK_MAX_RETRIES", 60, minimum=0)
# audit_verify and case_replay --all read the ledger in batches of this many rows (server-side
# cursors on PostgreSQL): memory stays constant whatever the ledger's size.
ARBITER_AUDIT_VERIFY_BATCH_SIZE = env_int("ARBITER_AUDIT_VERIFY_BATCH_SIZE", 5000, minimum=1)
if ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS <= ARBITER_RUN_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured("ARBITER_RUN_HEARTBEAT_TIMEOUT_SECONDS must exceed ARBITER_RUN_HEARTBEAT_SECONDS.")

# `manage.py analyze --wait` gives up (exit 1, with the reason) after this many seconds.
ARBITER_ANALYZE_WAIT_SECONDS = env_int("ARBITER_ANALYZE_WAIT_SECONDS", 600, minimum=1)

# --- Retention (runs/retention.py, docs/adr/0005-retention.md) ---------------------------
# Days after which `manage.py purge_expired` (and beat, daily) purges expired state; 0 = keep
# forever. Only finished runs are touched; audit events, case events, evidence and messages never.
# Intermediate checkpoints of finished runs older than this are deleted; the final checkpoint (still
# loadable) and every checkpoint a fork was made from are kept.
ARBITER_RETENTION_CHECKPOINT_DAYS = env_int("ARBITER_RETENTION_CHECKPOINT_DAYS", 30, minimum=0)
# Model calls of finished runs older than this lose their content (messages, context, raw and
# validated output, error); the row, tokens, latency, provider/model, source refs and the sha256
# of what was removed stay.
ARBITER_RETENTION_MODEL_CONTEXT_DAYS = env_int("ARBITER_RETENTION_MODEL_CONTEXT_DAYS", 90, minimum=0)
# Memory records that expired, or were rejected or forgotten, more than this many days ago are deleted.
ARBITER_RETENTION_MEMORY_DAYS = env_int("ARBITER_RETENTION_MEMORY_DAYS", 30, minimum=0)
# Rows read per query while purging: bounds the job's memory (each tenant's purge is one transaction).
ARBITER_RETENTION_BATCH_SIZE = env_int("ARBITER_RETENTION_BATCH_SIZE", 500, minimum=1)

# Periodic duties every worker's heartbeat thread offers to do, one worker per interval (a
# compare-and-set on a DutyTurn row): the runs of a dead worker resume even with beat down.
# name -> (dotted path of a function taking no arguments, interval in seconds).
ARBITER_WORKER_DUTIES = {
    "reap-expired-run-leases": ("runs.executor.lease_reap_expired", ARBITER_REAP_INTERVAL_SECONDS),
}
