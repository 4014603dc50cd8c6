"""Arbiter settings. Every value comes from the environment; bad values stop the process loudly.

The defaults run everything on one machine with no service installed: SQLite, Celery's
filesystem transport, and the file email backend (see README)."""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("ARBITER_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required unless DEBUG=1.")
    SECRET_KEY = "insecure-dev-only-key-never-use-in-production"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Every app and every middleware, in one place each. Order matters for the middleware: the
# request passes them top to bottom (metrics and request context first, then the probes that must
# answer before ALLOWED_HOSTS is checked, the API version header and CORS before security, static
# files and the CSP right after it) and the response bottom to top.
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "django_htmx",
    "core",
    "accounts",
    "audit",
    "cases",
    "conversations",
    "runs",
    "agents",
    "analyst",
    "web",
    "drf_spectacular_sidecar",  # the API docs' JS and CSS served from here (no CDN)
    "csp",
    "axes",  # login lockout
    "django_prometheus",
    "ops",
    "outbox",
    "integrations",
    "corsheaders",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "ops.middleware.RequestContextMiddleware",
    "ops.middleware.HealthProbeMiddleware",
    "core.api_headers.ApiVersionHeaderMiddleware",
    "corsheaders.middleware.CorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "web.errors.DomainErrorMiddleware",
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    "core.outages.OutageMiddleware",  # a database or broker outage is a 503, not a 500
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'arbiter.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 0))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The default lives under VAR_DIR; create its folder so a first `migrate` just works.
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Several processes (web + worker) share the file: WAL and a busy timeout avoid "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
         "transaction_mode": "IMMEDIATE"}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# PBKDF2-SHA256 at an iteration count measured here (docs/adr/0023-login-fast.md): a login costs one
# hash. Stored hashes at any count keep working and are re-hashed at this count on the next login.
ARBITER_PASSWORD_ITERATIONS = env_int("ARBITER_PASSWORD_ITERATIONS", 150_000, minimum=100_000)
PASSWORD_HASHERS = [  # the same algorithm name as Django's PBKDF2 hasher, which it replaces
    "accounts.hashers.ConfiguredPBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "web:case_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"

# --- Email (notices) ---------------------------------------------------------------------
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(VAR_DIR / "outbox"))
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "notices@arbiter.example")
NOTICE_MESSAGE_ID_DOMAIN = env_str("NOTICE_MESSAGE_ID_DOMAIN", "arbiter.example")

# --- Evidence ------------------------------------------------------------------------------
EVIDENCE_MAX_BYTES = env_int("EVIDENCE_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
EVIDENCE_ALLOWED_CONTENT_TYPES = env_list(
    "EVIDENCE_ALLOWED_CONTENT_TYPES",
    ["text/plain", "text/csv", "text/markdown", "application/json", "application/pdf",
     "image/png", "image/jpeg", "message/rfc822"],
)
DATA_UPLOAD_MAX_MEMORY_SIZE = EVIDENCE_MAX_BYTES + 1024 * 1024

# --- Celery --------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_DIR = Path(env_str("CELERY_BROKER_DIR", str(VAR_DIR / "broker")))
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=1)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = TIME_ZONE

# --- Domain knobs --------------------------------------------------------------------------
ARBITER_TENANT_MAX_CONCURRENT_RUNS = env_int("ARBITER_TENANT_MAX_CONCURRENT_RUNS", 4, minimum=1)
ARBITER_RUN_LEASE_SECONDS = env_int("ARBITER_RUN_LEASE_SECONDS", 120, minimum=1)
ARBITER_MODEL_PROVIDER = env_str("ARBITER_MODEL_PROVIDER", "offline")
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
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL", "")
OPENAI_API_KEY = env_str("OPENAI_API_KEY", "")
OPENAI_MODEL = env_str("OPENAI_MODEL", "")
OPENAI_TIMEOUT_SECONDS = env_int("OPENAI_TIMEOUT_SECONDS", 60, minimum=1)

# --- REST API ------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Arbiter API",
    "DESCRIPTION": "Cases, proposals, notices, runs and audit. Agents propose; people decide.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- Conversations ---------------------------------------------------------------
# Token budget for the thread part of a chat context (summary + recent turns); a thread may
# override it. When a thread's context would exceed it, older turns are compacted into a summary.
CONVERSATIONS_CONTEXT_TOKEN_BUDGET = env_int("CONVERSATIONS_CONTEXT_TOKEN_BUDGET", 3000, minimum=200)
# The last N messages always enter a context verbatim (truncated per message if they must be).
CONVERSATIONS_KEEP_RECENT = env_int("CONVERSATIONS_KEEP_RECENT", 6, minimum=1)
# At most this many messages after the latest summary are read to build a context: the cost of a
# context never depends on the length of the thread.
CONVERSATIONS_CONTEXT_MAX_ROWS = env_int("CONVERSATIONS_CONTEXT_MAX_ROWS", 200, minimum=10)
# At most this many messages are folded into a summary by one compaction run.
CONVERSATIONS_COMPACTION_BATCH = env_int("CONVERSATIONS_COMPACTION_BATCH", 400, minimum=10)
# ... and at most this many tokens of them (each turn cut to a tenth of it) go to the summariser.
CONVERSATIONS_COMPACTION_INPUT_TOKENS = env_int("CONVERSATIONS_COMPACTION_INPUT_TOKENS", 6000, minimum=500)
CONVERSATIONS_MESSAGE_MAX_CHARS = env_int("CONVERSATIONS_MESSAGE_MAX_CHARS", 8000, minimum=100)

# --- Operations: notice dispatch task, Celery beat --------------------------------------------
# A failed send (SMTP down, ...) leaves the notice `failed` (retryable); the dispatch task retries
# it with exponential backoff: BACKOFF, 2*BACKOFF, 4*BACKOFF ... seconds, at most MAX_RETRIES times.
ARBITER_NOTICE_DISPATCH_MAX_RETRIES = env_int("ARBITER_NOTICE_DISPATCH_MAX_RETRIES", 5, minimum=0)
ARBITER_NOTICE_DISPATCH_RETRY_BACKOFF_SECONDS = env_int("ARBITER_NOTICE_DISPATCH_RETRY_BACKOFF_SECONDS", 30,
                                                        minimum=1)
CELERY_BEAT_SCHEDULE_FILENAME = env_str("CELERY_BEAT_SCHEDULE_FILENAME", str(VAR_DIR / "celerybeat-schedule"))

# --- Browser UI and API docs (web/, cases/api/) --------------------------------------------
# Domain errors raised while a browser page is rendered map to a page (409/403/404/400) in one
# place, web.errors.DomainErrorMiddleware; the REST API maps them in core.api.exception_handler.
# Swagger UI (/api/docs/) is served from drf-spectacular-sidecar's bundled static files, so the
# API docs work offline: no CDN, no external URL.
SPECTACULAR_SETTINGS = {
    **SPECTACULAR_SETTINGS,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    # Several models have a `status` / `kind`; name each choice set after its model.
    "ENUM_NAME_OVERRIDES": {
        "CaseStatusEnum": "cases.models.CaseStatus",
        "ProposalStatusEnum": "cases.models.ProposalStatus",
        "NoticeStatusEnum": "cases.models.NoticeStatus",
        "ProposalKindEnum": "cases.models.ProposalKind",
        "EvidenceKindEnum": "cases.models.EvidenceKind",
        "RiskLevelEnum": "cases.models.RiskLevel",
    },
}

# --- Agent runs (runs/, docs/runs-contract.md) ---------------------------------------------
# Default budgets of a run (steps, tokens, wall time; reaching one fails it); run_start may lower or raise them per run.
ARBITER_RUN_MAX_STEPS = env_int("ARBITER_RUN_MAX_STEPS", 40, minimum=1)
ARBITER_RUN_MAX_TOKENS = env_int("ARBITER_RUN_MAX_TOKENS", 200_000, minimum=1)
ARBITER_RUN_MAX_WALL_SECONDS = env_int("ARBITER_RUN_MAX_WALL_SECONDS", 1800, minimum=1)
# A step failing with a retryable provider error is retried this many times, then fails the run.
ARBITER_RUN_MAX_STEP_RETRIES = env_int("ARBITER_RUN_MAX_STEP_RETRIES", 3, minimum=0)
ARBITER_RUN_RETRY_BACKOFF_SECONDS = env_int("ARBITER_RUN_RETRY_BACKOFF_SECONDS", 5, minimum=0)
# Token budget for evidence excerpts in one model context.
ARBITER_CONTEXT_EVIDENCE_TOKENS = env_int("ARBITER_CONTEXT_EVIDENCE_TOKENS", 6000, minimum=100)
# Dotted path of the function that redacts personal data from everything in model contexts
# (one redactor, core.redaction, for evidence, case fields, messages, memory ...).
ARBITER_CONTEXT_REDACTOR = env_str("ARBITER_CONTEXT_REDACTOR", "core.redaction.redact_personal_data")
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
CELERY_BEAT_SCHEDULE = {
    "reap-expired-run-leases": {
        "task": "runs.tasks.reap_expired_leases_task",
        "schedule": float(ARBITER_REAP_INTERVAL_SECONDS),
    },
    "purge-expired-state": {"task": "runs.tasks.retention_purge_task", "schedule": float(24 * 60 * 60)},
}

# --- Audit ledger keys and anchors (docs/adr/0017-i21-keyed-ledger.md) -------------------------
# Each event's chain hash is an HMAC under a secret kept outside the database: ARBITER_AUDIT_KEYS
# ("kid:base64secret,..." the first signs new events, the others verify older ones) or the file
# ARBITER_AUDIT_KEY_FILE. Required unless DEBUG=1, where a development key derived from
# SECRET_KEY (key id "development-only") is used. Signed anchors of every stream head are appended
# to ARBITER_AUDIT_ANCHOR_DIR/anchors.jsonl by beat every ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS.
from audit.keys import KEYGEN_HINT, AuditKeyError, development_key_ring, load_key_ring  # noqa: E402

try:
    ARBITER_AUDIT_KEYS = load_key_ring(env_str("ARBITER_AUDIT_KEYS", ""), env_str("ARBITER_AUDIT_KEY_FILE", ""))
except AuditKeyError as exc:
    raise ImproperlyConfigured(str(exc)) from None
if not ARBITER_AUDIT_KEYS:
    if not DEBUG:
        raise ImproperlyConfigured(f"ARBITER_AUDIT_KEYS (or ARBITER_AUDIT_KEY_FILE) is required unless DEBUG=1: "
                                   f"{KEYGEN_HINT}.")
    ARBITER_AUDIT_KEYS = development_key_ring(SECRET_KEY)
ARBITER_AUDIT_KEY_ID = next(iter(ARBITER_AUDIT_KEYS))
ARBITER_AUDIT_ANCHOR_DIR = Path(env_str("ARBITER_AUDIT_ANCHOR_DIR", str(VAR_DIR / "anchors")))
ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS = env_int("ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS", 3600, minimum=60)
CELERY_BEAT_SCHEDULE["anchor-audit-heads"] = {
    "task": "audit.tasks.audit_anchor_task", "schedule": float(ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS)}

# --- Deadlines and evidence extraction (cases/deadlines.py, cases/extraction.py) -----
# How often the beat task records due-soon / overdue crossings (once per crossing, whatever the rate).
ARBITER_DEADLINE_SCAN_INTERVAL_SECONDS = env_int("ARBITER_DEADLINE_SCAN_INTERVAL_SECONDS", 3600, minimum=60)
CELERY_BEAT_SCHEDULE["record-deadline-crossings"] = {
    "task": "cases.tasks.deadline_crossings_task", "schedule": float(ARBITER_DEADLINE_SCAN_INTERVAL_SECONDS)}
# PDF evidence the worker reads for the agents; a larger one is kept but marked "not readable by
# the agents" with the reason.
ARBITER_PDF_MAX_BYTES = env_int("ARBITER_PDF_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
ARBITER_PDF_MAX_PAGES = env_int("ARBITER_PDF_MAX_PAGES", 200, minimum=1)
ARBITER_PDF_MAX_CHARS = env_int("ARBITER_PDF_MAX_CHARS", 500_000, minimum=1)

# --- REST API for runs, memory and threads (runs/api, conversations/api) ----------------------
# Their models have a `status` too; name each choice set after its model (as for cases above).
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    **SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"],
    "RunStatusEnum": "runs.models.RunStatus",
    "RunPhaseEnum": "runs.models.RunPhase",
    "StepStatusEnum": "runs.models.StepStatus",
    "ToolCallStatusEnum": "runs.models.ToolCallStatus",
    "EffectTypeEnum": "runs.models.EffectType",
    "MemoryStatusEnum": "runs.models.MemoryStatus",
    "MemoryTypeEnum": "runs.models.MemoryType",
    "MessageRoleEnum": "conversations.models.MessageRole",
}

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

# --- Security: HTTPS, cookies, HSTS, proxy header -----------------------------------
# Secure by default without DEBUG; each can be turned off explicitly (e.g. SECURE_SSL_REDIRECT=0
# when a proxy in front already redirects). `manage.py check --deploy` is clean with the README's
# production settings (tests/ops/test_deploy_settings.py runs it).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
# HSTS: browsers refuse plain HTTP to this host for that many seconds once they saw the header over
# HTTPS. Preload only matters once the domain is submitted to the browsers' preload list.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
# Opt-in, only behind a proxy that sets it and strips it from clients: "HEADER,value", e.g.
# HTTP_X_FORWARDED_PROTO,https. Without it, requests the proxy received over HTTPS look like HTTP.
_proxy_ssl_header = env_list("SECURE_PROXY_SSL_HEADER", [])
if _proxy_ssl_header:
    if len(_proxy_ssl_header) != 2 or not _proxy_ssl_header[0].startswith("HTTP_"):
        raise ImproperlyConfigured("SECURE_PROXY_SSL_HEADER must be 'HTTP_<HEADER>,<value>', e.g. "
                                   "HTTP_X_FORWARDED_PROTO,https.")
    SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header)

# --- Content-Security-Policy (django-csp 4) ----------------------------------------------
# No inline script or style except with the per-request nonce (the Swagger UI page, ops/templates);
# htmx's own indicator <style> is turned off in templates/base.html. CSP_REPORT_ONLY=1 sends the
# policy as Content-Security-Policy-Report-Only (to try a change without breaking pages).
from csp.constants import NONCE, NONE, SELF  # noqa: E402

_csp = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        # + the hash of templates/500.html's inline style (rendered without a request, so no nonce;
        # tests/ops/test_probes_and_metrics.py fails if that style changes without this hash).
        "style-src": [SELF, NONCE, "'sha256-SlPdcaoFrHx4FSrJO/vLwa6hRjKVc3rJCmZMn7l5p/c='"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
if env_bool("CSP_REPORT_ONLY", False):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _csp
    CONTENT_SECURITY_POLICY = None
else:
    CONTENT_SECURITY_POLICY = _csp
TEMPLATES[0]["OPTIONS"]["context_processors"].append("csp.context_processors.nonce")

# --- Login throttling and lockout (django-axes) --------------------------------------
# After AXES_FAILURE_LIMIT failed logins for one username from one address (login page, admin,
# HTTP Basic on the API), that pair is locked out — the right password included — for
# AXES_COOLOFF_MINUTES; the lockout is written to the audit ledger (ops/security.py).
from datetime import timedelta  # noqa: E402

AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env_bool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_LOCKOUT_CALLABLE = "ops.security.lockout_response"  # 429 + Retry-After; {code, detail} under /api/

# --- Operations: request ids, JSON logs, health probes, metrics, static files ----------
# Outermost: Prometheus timing, then the request id (on every response, the probes' and lockouts'
# included), then /healthz and /readyz (answered before host checks and the HTTPS redirect).
# WhiteNoise serves STATIC_ROOT (`manage.py collectstatic`) from the app server; CSP sits right
# inside the security middleware; axes must be last (before Prometheus' closing half).
# Structured logs (ops/logging.py): json (one object per line) or console; both carry request_id,
# user_id, tenant_id, case, run_id and step where known, in the web and in the worker.
LOG_FORMAT = env_str("LOG_FORMAT", "console" if DEBUG else "json")
from ops.logging import LOG_FORMATS, configure_structlog, logging_config  # noqa: E402

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
# var/ and the beat schedule's folder exist whatever the database and broker (celery beat cannot
# create its schedule file otherwise).
for _directory in (VAR_DIR, Path(CELERY_BEAT_SCHEDULE_FILENAME).parent):
    _directory.mkdir(parents=True, exist_ok=True)
# --- Agents: triage confidence and the real-model provider ------------------------


def _fraction(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number; use a value between 0 and 1.") from None
    if not 0.0 <= value <= 1.0:
        raise ImproperlyConfigured(f"{name}={value} is outside 0..1.")
    return value


# Below this calibrated product confidence, triage says "needs an analyst", the adjudicator raises a
# dispute and notices leave product and issue out.
ARBITER_TRIAGE_MIN_CONFIDENCE = _fraction("ARBITER_TRIAGE_MIN_CONFIDENCE",
                                          env_str("ARBITER_TRIAGE_MIN_CONFIDENCE", "0.6"))
# Where the offline analyst's trained classifier is kept (`manage.py train_analyst` writes it;
# steps only load it). Default: <ARBITER_VAR_DIR>/analyst
ARBITER_ANALYST_DIR = Path(env_str("ARBITER_ANALYST_DIR", str(VAR_DIR / "analyst")))
# Output token limit of one model answer, and the reasoning effort sent to models that take one
# ("" = do not send the parameter; minimal, low, medium or high).
OPENAI_MAX_OUTPUT_TOKENS = env_int("OPENAI_MAX_OUTPUT_TOKENS", 1200, minimum=64)
OPENAI_REASONING_EFFORT = (env_str("OPENAI_REASONING_EFFORT", "") or "").strip().lower()
if OPENAI_REASONING_EFFORT not in ("", "minimal", "low", "medium", "high"):
    raise ImproperlyConfigured(f"OPENAI_REASONING_EFFORT={OPENAI_REASONING_EFFORT!r}: use minimal, low, medium, "
                               "high, or leave it empty to not send it.")
# --- No work lost, no email sent twice (outbox/, cases email states; ADR 0012) ---------
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
# A notice `sending` for longer than this is stuck (its worker died mid-send): an operator may settle it.
ARBITER_NOTICE_SENDING_STUCK_SECONDS = env_int("ARBITER_NOTICE_SENDING_STUCK_SECONDS", 900, minimum=1)
# The same chat message from the same person within this many seconds is a retry, not a new message.
ARBITER_CHAT_RETRY_WINDOW_SECONDS = env_int("ARBITER_CHAT_RETRY_WINDOW_SECONDS", 30, minimum=0)
# `manage.py analyze --wait` gives up (exit 1, with the reason) after this many seconds.
ARBITER_ANALYZE_WAIT_SECONDS = env_int("ARBITER_ANALYZE_WAIT_SECONDS", 600, minimum=1)
# A dispatch published this long ago whose notice is still approved with no dispatch: the broker lost
# the task (a restart without persistence); beat publishes it again (once per lost publication).
ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS = env_int("ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS", 120,
                                                          minimum=1)
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,
    "relay-outbox": {"task": "outbox.tasks.outbox_relay_task",
                     "schedule": float(ARBITER_OUTBOX_RELAY_INTERVAL_SECONDS)},
    "redeliver-lost-notice-dispatches": {"task": "cases.tasks.notice_dispatch_redeliver_task",
                                         "schedule": float(max(ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS // 2,
                                                               5))},
}
# Redis (and SQS) redeliver a message nobody acknowledged after the visibility timeout: an hour by
# default, i.e. a killed worker's tasks would wait an hour. Tasks are acked late, so the timeout must
# exceed the longest a task may run: the largest hard time limit, plus a margin.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": max(CELERY_TASK_TIME_LIMIT, ARBITER_RUN_STEP_TIME_LIMIT) + 60,
}
# --- REST API for integrations (core/api.py, accounts API keys, integrations/) ---------
# One block, so parallel branches merge: it replaces the REST_FRAMEWORK defaults above.
# HTTP Basic auth for the API is off unless this is set (API keys are the machine credential;
# django-axes locks out repeated failed passwords when it is on).
ARBITER_API_BASIC_AUTH = env_bool("ARBITER_API_BASIC_AUTH", False)
# Largest JSON/form body the API reads (bytes): a bigger one is a JSON 413. Uploads are bounded by
# EVIDENCE_MAX_BYTES (DATA_UPLOAD_MAX_MEMORY_SIZE above); JSON bodies by this.
ARBITER_API_MAX_BODY_BYTES = env_int("ARBITER_API_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
# Deepest nesting of arrays/objects accepted in a JSON body.
ARBITER_API_MAX_JSON_DEPTH = env_int("ARBITER_API_MAX_JSON_DEPTH", 20, minimum=2)
# Server-side ceilings of what a client may ask for: run budgets (start, resume, fork) and a
# thread's token budget. Larger values are refused with a field error naming the maximum.
ARBITER_API_MAX_RUN_STEPS = env_int("ARBITER_API_MAX_RUN_STEPS", 200, minimum=1)
ARBITER_API_MAX_RUN_TOKENS = env_int("ARBITER_API_MAX_RUN_TOKENS", 2_000_000, minimum=1)
ARBITER_API_MAX_RUN_WALL_SECONDS = env_int("ARBITER_API_MAX_RUN_WALL_SECONDS", 6 * 3600, minimum=1)
ARBITER_API_MAX_THREAD_TOKEN_BUDGET = env_int("ARBITER_API_MAX_THREAD_TOKEN_BUDGET", 100_000, minimum=200)
# Lists: default and largest page_size.
ARBITER_API_PAGE_SIZE = env_int("ARBITER_API_PAGE_SIZE", 50, minimum=1)
ARBITER_API_MAX_PAGE_SIZE = env_int("ARBITER_API_MAX_PAGE_SIZE", 200, minimum=1)
# Lists ordered by a key that changes (updated_at) page over a snapshot of their ids taken by the
# first page (core.paging): kept this long in the shared cache, for lists of at most this many rows.
ARBITER_API_SNAPSHOT_TTL_SECONDS = env_int("ARBITER_API_SNAPSHOT_TTL_SECONDS", 3600, minimum=60)
ARBITER_API_SNAPSHOT_MAX_ROWS = env_int("ARBITER_API_SNAPSHOT_MAX_ROWS", 50_000, minimum=100)
# Idempotency-Key records are kept this long (hours); a key reused after that is a new request.
ARBITER_API_IDEMPOTENCY_TTL_HOURS = env_int("ARBITER_API_IDEMPOTENCY_TTL_HOURS", 24, minimum=1)
# Rate limits (DRF syntax "<n>/<second|minute|hour|day>"): per credential for run starts and
# message posts, per client IP for failed authentications.
ARBITER_API_THROTTLE_RUN_START = env_str("ARBITER_API_THROTTLE_RUN_START", "30/minute")
ARBITER_API_THROTTLE_MESSAGE_POST = env_str("ARBITER_API_THROTTLE_MESSAGE_POST", "60/minute")
ARBITER_API_THROTTLE_AUTH_FAILURE = env_str("ARBITER_API_THROTTLE_AUTH_FAILURE", "20/minute")
# Seconds a client is told to wait (Retry-After) before polling a run it just started.
ARBITER_API_RUN_POLL_SECONDS = env_int("ARBITER_API_RUN_POLL_SECONDS", 2, minimum=1)
for _name in ("ARBITER_API_THROTTLE_RUN_START", "ARBITER_API_THROTTLE_MESSAGE_POST",
              "ARBITER_API_THROTTLE_AUTH_FAILURE"):
    _rate = globals()[_name]
    _count, _, _period = _rate.partition("/")
    if not _count.isdigit() or _period not in {"second", "minute", "hour", "day", "s", "m", "h", "d"}:
        raise ImproperlyConfigured(f"{_name}={_rate!r} is not a rate like 30/minute.")
REST_FRAMEWORK = {
    **REST_FRAMEWORK,
    # Bearer API keys first: an unauthenticated request gets 401 with `WWW-Authenticate: Bearer`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        *(["rest_framework.authentication.BasicAuthentication"] if ARBITER_API_BASIC_AUTH else []),
    ],
    "DEFAULT_PARSER_CLASSES": ["core.api.BoundedJSONParser", "core.api.BoundedFormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer",
                                 "rest_framework.renderers.BrowsableAPIRenderer"],
    "DEFAULT_PAGINATION_CLASS": "core.paging.KeysetPagination",
    "DEFAULT_SCHEMA_CLASS": "core.api_schema.ApiAutoSchema",
    "PAGE_SIZE": ARBITER_API_PAGE_SIZE,
    "DEFAULT_THROTTLE_RATES": {
        "run_start": ARBITER_API_THROTTLE_RUN_START,
        "message_post": ARBITER_API_THROTTLE_MESSAGE_POST,
        "auth_failure": ARBITER_API_THROTTLE_AUTH_FAILURE,
    },
}
# CSRF failures and Django's error pages answer JSON under /api/ (HTML elsewhere, as before).
CSRF_FAILURE_VIEW = "core.api.csrf_failure"
# Webhooks (integrations/): a delivery is retried with exponential backoff
# (BACKOFF, 2*BACKOFF, 4*BACKOFF ... seconds) at most MAX_ATTEMPTS times; an endpoint whose
# deliveries failed DISABLE_AFTER times in a row is disabled. Receivers should refuse a signature
# older than TOLERANCE seconds. Beat polls for due deliveries every POLL seconds (so a delivery
# written while the broker was down still goes out).
ARBITER_WEBHOOK_MAX_ATTEMPTS = env_int("ARBITER_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
ARBITER_WEBHOOK_BACKOFF_SECONDS = env_int("ARBITER_WEBHOOK_BACKOFF_SECONDS", 30, minimum=1)
ARBITER_WEBHOOK_DISABLE_AFTER = env_int("ARBITER_WEBHOOK_DISABLE_AFTER", 20, minimum=1)
ARBITER_WEBHOOK_TIMEOUT_SECONDS = env_int("ARBITER_WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
ARBITER_WEBHOOK_SIGNATURE_TOLERANCE_SECONDS = env_int("ARBITER_WEBHOOK_SIGNATURE_TOLERANCE_SECONDS", 300,
                                                      minimum=1)
ARBITER_WEBHOOK_POLL_SECONDS = env_int("ARBITER_WEBHOOK_POLL_SECONDS", 15, minimum=1)
# Only https:// webhook URLs are accepted unless this is on (local receivers, tests, `make run`).
ARBITER_WEBHOOK_ALLOW_HTTP = env_bool("ARBITER_WEBHOOK_ALLOW_HTTP", DEBUG)
# Webhooks reach public internet addresses only; these networks (comma-separated CIDRs, e.g.
# "10.20.0.0/16,fd00:1::/64") may be reached too, for receivers on premises. Default: none.
import ipaddress  # noqa: E402

ARBITER_WEBHOOK_ALLOWED_NETWORKS = env_list("ARBITER_WEBHOOK_ALLOWED_NETWORKS", [])
for _network in ARBITER_WEBHOOK_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"ARBITER_WEBHOOK_ALLOWED_NETWORKS: {_network!r} is not a network "
                                   f"(write CIDRs such as 10.20.0.0/16).") from None
CELERY_BEAT_SCHEDULE = {
    **CELERY_BEAT_SCHEDULE,
    "deliver-due-webhooks": {"task": "integrations.tasks.webhook_deliver_due_task",
                             "schedule": float(ARBITER_WEBHOOK_POLL_SECONDS)},
    "purge-expired-idempotency-keys": {"task": "integrations.tasks.idempotency_purge_task",
                                       "schedule": float(60 * 60)},
}
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    **SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"],
    "EventTypeEnum": "integrations.models.EventType",
    "DeliveryStatusEnum": "integrations.models.DeliveryStatus",
    "DeliveryErrorEnum": "integrations.models.DeliveryError",
}
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = ["drf_spectacular.hooks.postprocess_schema_enums",
                                                "core.api_schema.describe_responses",
                                                "core.api_schema.describe_who_may"]
# --- Client addresses and shared rate limits (ADR 0016; core/client_address.py, core/ratelimit.py) --
# The client's address is REMOTE_ADDR unless proxies in front are trusted: with COUNT = N, the N
# right-most hops (REMOTE_ADDR, then X-Forwarded-For from its right end) are proxies and the next
# hop is the client; with NETWORKS, only hops inside those networks count as proxies (and with both,
# a hop must pass both). Every throttle, the login lockout and the request log use this address.
ARBITER_TRUSTED_PROXY_COUNT = env_int("ARBITER_TRUSTED_PROXY_COUNT", 0, minimum=0)
ARBITER_TRUSTED_PROXY_NETWORKS = env_list("ARBITER_TRUSTED_PROXY_NETWORKS", [])
import ipaddress  # noqa: E402

for _network in ARBITER_TRUSTED_PROXY_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"ARBITER_TRUSTED_PROXY_NETWORKS: {_network!r} is not a network like "
                                   "10.0.0.0/8 or an address.") from None
AXES_CLIENT_IP_CALLABLE = "core.client_address.client_address"
REST_FRAMEWORK = {**REST_FRAMEWORK, "NUM_PROXIES": ARBITER_TRUSTED_PROXY_COUNT}
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
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.negotiation.ApiContentNegotiation"}
# Every answer under /api/ names the API version (core.api_headers). CORS for browser clients on
# other origins: only the origins listed (comma-separated, e.g. "https://app.example.com"); none
# by default. Credentials (cookies) are never shared cross-origin: such clients send API keys.
CORS_ALLOWED_ORIGINS = env_list("ARBITER_CORS_ALLOWED_ORIGINS", [])
from urllib.parse import urlsplit  # noqa: E402

for _origin in CORS_ALLOWED_ORIGINS:
    _parts = urlsplit(_origin)
    if _parts.scheme not in ("http", "https") or not _parts.netloc or _parts.path or _parts.query:
        raise ImproperlyConfigured(f"ARBITER_CORS_ALLOWED_ORIGINS: {_origin!r} is not an origin "
                                   f"(write scheme://host[:port], e.g. https://app.example.com).")
CORS_URLS_REGEX = r"^/api/.*$"
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_HEADERS = ["accept", "authorization", "content-type", "idempotency-key", "if-match", "if-none-match"]
CORS_EXPOSE_HEADERS = ["etag", "location", "retry-after", "idempotent-replayed", "arbiter-api-version"]
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = [*SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"],
                                                "core.api_schema.forbid_unknown_body_fields"]

# --- Keeps serving when parts fail (docs/adr/0021-i24-keeps-serving.md) ------------------------
# Periodic duties every worker's heartbeat thread offers to do, one worker per interval (a
# compare-and-set on a DutyTurn row): the runs of a dead worker resume even with beat down.
# name -> (dotted path of a function taking no arguments, interval in seconds).
ARBITER_WORKER_DUTIES = {
    "reap-expired-run-leases": ("runs.executor.lease_reap_expired", ARBITER_REAP_INTERVAL_SECONDS),
}
# Beat's reaper is now only a second path: every 30 s (not every interval, a message each time).
CELERY_BEAT_SCHEDULE["reap-expired-run-leases"]["schedule"] = float(max(ARBITER_REAP_INTERVAL_SECONDS, 30))
# Beat refreshes its heartbeat row this often; older than MISSING_AFTER, /readyz says `degraded`
# (still 200), drift_report lists beat_missing, arbiter_beat_heartbeat_age_seconds shows it.
ARBITER_BEAT_HEARTBEAT_SECONDS = env_int("ARBITER_BEAT_HEARTBEAT_SECONDS", 10, minimum=1)
ARBITER_BEAT_MISSING_AFTER_SECONDS = env_int("ARBITER_BEAT_MISSING_AFTER_SECONDS", 60, minimum=2)
if ARBITER_BEAT_MISSING_AFTER_SECONDS <= ARBITER_BEAT_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured("ARBITER_BEAT_MISSING_AFTER_SECONDS must exceed ARBITER_BEAT_HEARTBEAT_SECONDS.")
CELERY_BEAT_SCHEDULER = "outbox.beat:HeartbeatScheduler"
# A request that meets a database or broker outage answers 503 with this Retry-After (seconds).
ARBITER_OUTAGE_RETRY_AFTER_SECONDS = env_int("ARBITER_OUTAGE_RETRY_AFTER_SECONDS", 10, minimum=1)
