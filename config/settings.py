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
    "web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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

# --- Conversations (issue 4) ---------------------------------------------------------------
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
MIDDLEWARE = [*MIDDLEWARE, "web.errors.DomainErrorMiddleware"]
# Swagger UI (/api/docs/) is served from drf-spectacular-sidecar's bundled static files, so the
# API docs work offline: no CDN, no external URL.
INSTALLED_APPS = [*INSTALLED_APPS, "drf_spectacular_sidecar"]
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
# Default budgets of a run (DESIGN §4); run_start may lower or raise them per run.
ARBITER_RUN_MAX_STEPS = env_int("ARBITER_RUN_MAX_STEPS", 40, minimum=1)
ARBITER_RUN_MAX_TOKENS = env_int("ARBITER_RUN_MAX_TOKENS", 200_000, minimum=1)
ARBITER_RUN_MAX_WALL_SECONDS = env_int("ARBITER_RUN_MAX_WALL_SECONDS", 1800, minimum=1)
# A step failing with a retryable provider error is retried this many times, then fails the run.
ARBITER_RUN_MAX_STEP_RETRIES = env_int("ARBITER_RUN_MAX_STEP_RETRIES", 3, minimum=0)
ARBITER_RUN_RETRY_BACKOFF_SECONDS = env_int("ARBITER_RUN_RETRY_BACKOFF_SECONDS", 5, minimum=0)
# A full state snapshot every k checkpoints; deltas in between (linear storage).
ARBITER_CHECKPOINT_SNAPSHOT_EVERY = env_int("ARBITER_CHECKPOINT_SNAPSHOT_EVERY", 10, minimum=1)
# Token budget for evidence excerpts in one model context.
ARBITER_CONTEXT_EVIDENCE_TOKENS = env_int("ARBITER_CONTEXT_EVIDENCE_TOKENS", 6000, minimum=100)
# Dotted path of the function that redacts personal data from everything in model contexts
# (issue 13: one redactor, core.redaction, for evidence, case fields, messages, memory ...).
ARBITER_CONTEXT_REDACTOR = env_str("ARBITER_CONTEXT_REDACTOR", "core.redaction.redact_personal_data")
ARBITER_MEMORY_DEFAULT_TTL_DAYS = env_int("ARBITER_MEMORY_DEFAULT_TTL_DAYS", 180, minimum=1)
ARBITER_REAP_INTERVAL_SECONDS = env_int("ARBITER_REAP_INTERVAL_SECONDS", 30, minimum=1)
# Per-task time limits (seconds): a step holds a lease of ARBITER_RUN_LEASE_SECONDS, so the hard
# limit stays below it plus the reap interval.
ARBITER_RUN_STEP_SOFT_TIME_LIMIT = env_int("ARBITER_RUN_STEP_SOFT_TIME_LIMIT", 110, minimum=1)
ARBITER_RUN_STEP_TIME_LIMIT = env_int("ARBITER_RUN_STEP_TIME_LIMIT", 120, minimum=1)
# Fault injection for the crash tests only: "<tool name>:<marker file>" makes the tool executor
# write the marker and sleep right after that tool's effect, before recording its outcome, so a
# test can SIGKILL the worker at exactly that point. Empty (the default) disables it.
ARBITER_FAULT_PAUSE_AFTER_EFFECT = env_str("ARBITER_FAULT_PAUSE_AFTER_EFFECT", "")
CELERY_BEAT_SCHEDULE = {
    "reap-expired-run-leases": {
        "task": "runs.tasks.reap_expired_leases_task",
        "schedule": float(ARBITER_REAP_INTERVAL_SECONDS),
    },
    "purge-expired-state": {"task": "runs.tasks.retention_purge_task", "schedule": float(24 * 60 * 60)},
}

# --- Deadlines and evidence extraction (issue 7, i7: cases/deadlines.py, cases/extraction.py) -----
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

# --- Retention (DESIGN §8; runs/retention.py, docs/adr/0005-retention.md) ---------------------
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

# --- Security (issue 13): HTTPS, cookies, HSTS, proxy header -----------------------------------
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

# --- Content-Security-Policy (issue 13; django-csp 4) ----------------------------------------------
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
INSTALLED_APPS = [*INSTALLED_APPS, "csp"]
TEMPLATES[0]["OPTIONS"]["context_processors"].append("csp.context_processors.nonce")

# --- Login throttling and lockout (issue 13; django-axes) --------------------------------------
# After AXES_FAILURE_LIMIT failed logins for one username from one address (login page, admin,
# HTTP Basic on the API), that pair is locked out — the right password included — for
# AXES_COOLOFF_MINUTES; the lockout is written to the audit ledger (ops/security.py).
from datetime import timedelta  # noqa: E402

INSTALLED_APPS = [*INSTALLED_APPS, "axes"]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env_bool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_LOCKOUT_CALLABLE = "ops.security.lockout_response"  # 429 + Retry-After; {code, detail} under /api/

# --- Operations (issue 13): request ids, JSON logs, health probes, metrics, static files ----------
# Outermost: Prometheus timing, then the request id (on every response, the probes' and lockouts'
# included), then /healthz and /readyz (answered before host checks and the HTTPS redirect).
# WhiteNoise serves STATIC_ROOT (`manage.py collectstatic`) from the app server; CSP sits right
# inside the security middleware; axes must be last (before Prometheus' closing half).
INSTALLED_APPS = [*INSTALLED_APPS, "django_prometheus", "ops"]
MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "ops.middleware.RequestContextMiddleware",
    "ops.middleware.HealthProbeMiddleware",
    *MIDDLEWARE,
]
_security_index = MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1
MIDDLEWARE[_security_index:_security_index] = ["whitenoise.middleware.WhiteNoiseMiddleware",
                                               "csp.middleware.CSPMiddleware"]
MIDDLEWARE += ["axes.middleware.AxesMiddleware", "django_prometheus.middleware.PrometheusAfterMiddleware"]
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
