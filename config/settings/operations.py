"""Operations: structured logs, health probes, metrics, the shared cache, the transactional outbox,
worker and beat heartbeats, and what an outage answers."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env_int, env_list, env_str
from config.settings.base import DEBUG
from ops.logging import LOG_FORMATS, configure_structlog, logging_config

# --- Logs, health probes, metrics ------------------------------------------------------------
# Structured logs (ops/logging.py): json (one object per line) or console; both carry request_id,
# user_id, tenant_id, case, run_id and step where known, in the web and in the worker.
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOG_FORMAT = env_str("LOG_FORMAT", "console" if DEBUG else "json")

if LOG_FORMAT not in LOG_FORMATS:
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r}: use json or console.")

LOGGING = logging_config(level=LOG_LEVEL, fmt=LOG_FORMAT)
configure_structlog()
# /readyz: the registered checks to run (default: all registered — database, broker, and whatever
# other apps register, e.g. the worker heartbeat and outbox lag) and the time each may take.
ARBITER_READYZ_CHECKS = env_list("ARBITER_READYZ_CHECKS", [])
ARBITER_READYZ_TIMEOUT_SECONDS = env_int("ARBITER_READYZ_TIMEOUT_SECONDS", 3, minimum=1)
# /metrics is for staff and admin users, or a scraper sending `Authorization: Bearer <token>`.
ARBITER_METRICS_TOKEN = env_str("ARBITER_METRICS_TOKEN", "")

# Rate-limit counters (and anything else cached) are shared by every process and machine: Redis when
# CACHE_URL is set (redis://host:6379/1), else a table of the database (created by `migrate`), whose
# increments ops.cache makes atomic. Never a per-process memory cache.
CACHE_URL = env_str("CACHE_URL", "")
if CACHE_URL:
    if not CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(f"CACHE_URL={CACHE_URL!r}: use redis://host:port/db (or rediss://, unix://).")
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL,
                          "KEY_PREFIX": "arbiter",
                          "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2}}}
else:
    CACHES = {"default": {"BACKEND": "ops.cache.AtomicDatabaseCache", "LOCATION": "arbiter_cache",
                          "OPTIONS": {"MAX_ENTRIES": 100_000}}}
# The REST API for integrators (ADR 0022): JSON unless a browser asks for a page.

# --- No work lost (outbox/; ADR 0012) ------------------------------------------------------
# Tasks are written to the outbox in the transaction of the change that needs them and relayed to
# the broker after the commit, then by beat every RELAY_INTERVAL seconds and by every worker's
# heartbeat thread; a publish that fails is retried with backoff (2, 4 ... 60 s).
ARBITER_OUTBOX_RELAY_INTERVAL_SECONDS = env_int("ARBITER_OUTBOX_RELAY_INTERVAL_SECONDS", 5, minimum=1)
# Rows published per relay pass, and how long a relay's claim on a row lasts before another may take it.
ARBITER_OUTBOX_RELAY_BATCH = env_int("ARBITER_OUTBOX_RELAY_BATCH", 200, minimum=1)
ARBITER_OUTBOX_CLAIM_SECONDS = env_int("ARBITER_OUTBOX_CLAIM_SECONDS", 30, minimum=1)
# drift_report flags outbox rows not relayed, and requested dispatches not started, after this long.
ARBITER_OUTBOX_DRIFT_AFTER_SECONDS = env_int("ARBITER_OUTBOX_DRIFT_AFTER_SECONDS", 300, minimum=1)
# Every worker refreshes its heartbeat row this often; a worker unseen for TIMEOUT seconds is dead.
ARBITER_WORKER_HEARTBEAT_SECONDS = env_int("ARBITER_WORKER_HEARTBEAT_SECONDS", 10, minimum=1)
ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS = env_int("ARBITER_WORKER_HEARTBEAT_TIMEOUT_SECONDS", 45, minimum=2)

# --- Keeps serving when parts fail (ADR 0021) -------------------------------------------
# Beat refreshes its heartbeat row this often; older than MISSING_AFTER, /readyz says `degraded`
# (still 200), drift_report lists beat_missing, arbiter_beat_heartbeat_age_seconds shows it.
ARBITER_BEAT_HEARTBEAT_SECONDS = env_int("ARBITER_BEAT_HEARTBEAT_SECONDS", 10, minimum=1)
ARBITER_BEAT_MISSING_AFTER_SECONDS = env_int("ARBITER_BEAT_MISSING_AFTER_SECONDS", 60, minimum=2)
if ARBITER_BEAT_MISSING_AFTER_SECONDS <= ARBITER_BEAT_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured("ARBITER_BEAT_MISSING_AFTER_SECONDS must exceed ARBITER_BEAT_HEARTBEAT_SECONDS.")
# A request that meets a database or broker outage answers 503 with this Retry-After (seconds).
ARBITER_OUTAGE_RETRY_AFTER_SECONDS = env_int("ARBITER_OUTAGE_RETRY_AFTER_SECONDS", 10, minimum=1)

# --- Browser UI ------------------------------------------------------------------------------
# How often (seconds) the case queue and the review inbox ask whether anything changed, to show new
# and changed items without a reload (one indexed query per ask; static/js/live-lists.js).
ARBITER_LIVE_LIST_SECONDS = env_int("ARBITER_LIVE_LIST_SECONDS", 10, minimum=1)

# --- The supervisor's dashboard (reports/) ---------------------------------------------
# How often beat rebuilds the dashboard's facts (service levels, time to decision, agent quality);
# workload and due dates are read live. The page says when its facts were last rebuilt.
ARBITER_DASHBOARD_REFRESH_SECONDS = env_int("ARBITER_DASHBOARD_REFRESH_SECONDS", 900, minimum=60)
