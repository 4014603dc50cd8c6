"""The REST API and its schema, webhooks, and CORS for browser clients on other origins."""

import ipaddress
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list, env_str
from config.settings.base import DEBUG
from config.settings.security import ARBITER_TRUSTED_PROXY_COUNT

# --- REST API for integrations (core/api.py, accounts API keys, integrations/) ---------
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
    # Bearer API keys first: an unauthenticated request gets 401 with `WWW-Authenticate: Bearer`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        *(["rest_framework.authentication.BasicAuthentication"] if ARBITER_API_BASIC_AUTH else []),
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "core.api.exception_handler",
    # Bodies are JSON; the one file upload (evidence/upload/) names multipart itself (ADR 0028).
    "DEFAULT_PARSER_CLASSES": ["core.api.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer",
                                 "rest_framework.renderers.BrowsableAPIRenderer"],
    # JSON unless a browser asks for a page first (ADR 0022).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.negotiation.ApiContentNegotiation",
    "DEFAULT_PAGINATION_CLASS": "core.paging.KeysetPagination",
    "DEFAULT_SCHEMA_CLASS": "core.api_schema.ApiAutoSchema",
    "PAGE_SIZE": ARBITER_API_PAGE_SIZE,
    "DEFAULT_THROTTLE_RATES": {
        "run_start": ARBITER_API_THROTTLE_RUN_START,
        "message_post": ARBITER_API_THROTTLE_MESSAGE_POST,
        "auth_failure": ARBITER_API_THROTTLE_AUTH_FAILURE,
    },
    # The client address behind trusted proxies (security.py), as DRF's throttles count it.
    "NUM_PROXIES": ARBITER_TRUSTED_PROXY_COUNT,
}
# CSRF failures and Django's error pages answer JSON under /api/ (HTML elsewhere, as before).
CSRF_FAILURE_VIEW = "core.api.csrf_failure"

# --- The API's schema and docs (/api/schema/, /api/docs/) ------------------------------------
# Domain errors raised while a browser page is rendered map to a page (409/403/404/400) in one
# place, web.errors.DomainErrorMiddleware; the REST API maps them in core.api.exception_handler.
# Swagger UI (/api/docs/) is served from drf-spectacular-sidecar's bundled static files, so the
# API docs work offline: no CDN, no external URL.
SPECTACULAR_SETTINGS = {
    "TITLE": "Arbiter API",
    "DESCRIPTION": "Cases, proposals, notices, runs and audit. Agents propose; people decide.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
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
        "RunStatusEnum": "runs.models.RunStatus",
        "RunPhaseEnum": "runs.models.RunPhase",
        "StepStatusEnum": "runs.models.StepStatus",
        "ToolCallStatusEnum": "runs.models.ToolCallStatus",
        "EffectTypeEnum": "runs.models.EffectType",
        "MemoryStatusEnum": "runs.models.MemoryStatus",
        "MemoryTypeEnum": "runs.models.MemoryType",
        "MessageRoleEnum": "conversations.models.MessageRole",
        "EventTypeEnum": "integrations.models.EventType",
        "DeliveryStatusEnum": "integrations.models.DeliveryStatus",
        "DeliveryErrorEnum": "integrations.models.DeliveryError",
    },
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "core.api_schema.describe_responses",
                             "core.api_schema.describe_who_may",
                             "core.api_schema.forbid_unknown_body_fields",
                             "core.api_schema.forbid_nul_in_query_text"],
}

# --- Webhooks (integrations/) -------------------------------------------------------------
# Webhooks (integrations/): a delivery is retried with exponential backoff
# (BACKOFF, 2*BACKOFF, 4*BACKOFF ... seconds, never more than BACKOFF_MAX apart) and given up after
# MAX_ATTEMPTS, except while its endpoint is failing everything (an outage): then it keeps being
# retried. An endpoint is disabled when a delivery fails and its failures began more than
# DISABLE_AFTER_SECONDS ago with no success since; its events keep being queued until it is enabled.
# After a secret rotation deliveries carry the old secret's signature too for SECRET_OVERLAP_SECONDS.
# One "redeliver since" call queues at most REDELIVER_MAX events. Receivers should refuse a signature
# older than TOLERANCE seconds. Beat polls for due deliveries every POLL seconds (so a delivery
# written while the broker was down still goes out).
ARBITER_WEBHOOK_MAX_ATTEMPTS = env_int("ARBITER_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
ARBITER_WEBHOOK_BACKOFF_SECONDS = env_int("ARBITER_WEBHOOK_BACKOFF_SECONDS", 30, minimum=1)
ARBITER_WEBHOOK_BACKOFF_MAX_SECONDS = env_int("ARBITER_WEBHOOK_BACKOFF_MAX_SECONDS", 3600, minimum=1)
ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS = env_int("ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS", 24 * 3600, minimum=0)
ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS = env_int("ARBITER_WEBHOOK_SECRET_OVERLAP_SECONDS", 24 * 3600, minimum=0)
ARBITER_WEBHOOK_REDELIVER_MAX = env_int("ARBITER_WEBHOOK_REDELIVER_MAX", 1000, minimum=1)
ARBITER_WEBHOOK_TIMEOUT_SECONDS = env_int("ARBITER_WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
ARBITER_WEBHOOK_SIGNATURE_TOLERANCE_SECONDS = env_int("ARBITER_WEBHOOK_SIGNATURE_TOLERANCE_SECONDS", 300,
                                                      minimum=1)
ARBITER_WEBHOOK_POLL_SECONDS = env_int("ARBITER_WEBHOOK_POLL_SECONDS", 15, minimum=1)
# Only https:// webhook URLs are accepted unless this is on (local receivers, tests, `make run`).
ARBITER_WEBHOOK_ALLOW_HTTP = env_bool("ARBITER_WEBHOOK_ALLOW_HTTP", DEBUG)
# Webhooks reach public internet addresses only; these networks (comma-separated CIDRs, e.g.
# "10.20.0.0/16,fd00:1::/64") may be reached too, for receivers on premises. Default: none.

ARBITER_WEBHOOK_ALLOWED_NETWORKS = env_list("ARBITER_WEBHOOK_ALLOWED_NETWORKS", [])
for _network in ARBITER_WEBHOOK_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"ARBITER_WEBHOOK_ALLOWED_NETWORKS: {_network!r} is not a network "
                                   f"(write CIDRs such as 10.20.0.0/16).") from None

# --- CORS ---------------------------------------------------------------------------------
# Every answer under /api/ names the API version (core.api_headers). CORS for browser clients on
# other origins: only the origins listed (comma-separated, e.g. "https://app.example.com"); none
# by default. Credentials (cookies) are never shared cross-origin: such clients send API keys.
CORS_ALLOWED_ORIGINS = env_list("ARBITER_CORS_ALLOWED_ORIGINS", [])

for _origin in CORS_ALLOWED_ORIGINS:
    _parts = urlsplit(_origin)
    if _parts.scheme not in ("http", "https") or not _parts.netloc or _parts.path or _parts.query:
        raise ImproperlyConfigured(f"ARBITER_CORS_ALLOWED_ORIGINS: {_origin!r} is not an origin "
                                   f"(write scheme://host[:port], e.g. https://app.example.com).")
CORS_URLS_REGEX = r"^/api/.*$"
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_HEADERS = ["accept", "authorization", "content-type", "idempotency-key", "if-match", "if-none-match"]
CORS_EXPOSE_HEADERS = ["etag", "location", "retry-after", "idempotent-replayed", "arbiter-api-version"]
