"""Cases: evidence uploads, deadline scans, notices by e-mail and their dispatch, PDF text extraction, bulk intake."""

from config.env import env_bool, env_int, env_list, env_str
from config.settings.base import VAR_DIR

# --- Evidence ------------------------------------------------------------------------------
EVIDENCE_MAX_BYTES = env_int("EVIDENCE_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
EVIDENCE_ALLOWED_CONTENT_TYPES = env_list(
    "EVIDENCE_ALLOWED_CONTENT_TYPES",
    ["text/plain", "text/csv", "text/markdown", "application/json", "application/pdf",
     "image/png", "image/jpeg", "message/rfc822"],
)
DATA_UPLOAD_MAX_MEMORY_SIZE = EVIDENCE_MAX_BYTES + 1024 * 1024

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
# A failed send (SMTP down, ...) leaves the notice `failed` (retryable); the dispatch task retries
# it with exponential backoff: BACKOFF, 2*BACKOFF, 4*BACKOFF ... seconds, at most MAX_RETRIES times.
ARBITER_NOTICE_DISPATCH_MAX_RETRIES = env_int("ARBITER_NOTICE_DISPATCH_MAX_RETRIES", 5, minimum=0)
ARBITER_NOTICE_DISPATCH_RETRY_BACKOFF_SECONDS = env_int("ARBITER_NOTICE_DISPATCH_RETRY_BACKOFF_SECONDS", 30,
                                                        minimum=1)
# A notice `sending` for longer than this is stuck (its worker died mid-send): an operator may settle it.
ARBITER_NOTICE_SENDING_STUCK_SECONDS = env_int("ARBITER_NOTICE_SENDING_STUCK_SECONDS", 900, minimum=1)
# A dispatch published this long ago whose notice is still approved with no dispatch: the broker lost
# the task (a restart without persistence); beat publishes it again (once per lost publication).
ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS = env_int("ARBITER_NOTICE_DISPATCH_REDELIVER_AFTER_SECONDS", 120,
                                                          minimum=1)

# --- Deadlines and evidence extraction (cases/deadlines.py, cases/extraction.py) -----
# How often the beat task records due-soon / overdue crossings (once per crossing, whatever the rate).
ARBITER_DEADLINE_SCAN_INTERVAL_SECONDS = env_int("ARBITER_DEADLINE_SCAN_INTERVAL_SECONDS", 3600, minimum=60)
# PDF evidence the worker reads for the agents; a larger one is kept but marked "not readable by
# the agents" with the reason.
ARBITER_PDF_MAX_BYTES = env_int("ARBITER_PDF_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
ARBITER_PDF_MAX_PAGES = env_int("ARBITER_PDF_MAX_PAGES", 200, minimum=1)
ARBITER_PDF_MAX_CHARS = env_int("ARBITER_PDF_MAX_CHARS", 500_000, minimum=1)

# --- Bulk intake: complaint imports (intake/, docs/adr/0029-bulk-intake.md) -------------------
# The largest complaints file accepted, on the upload page and by `manage.py import_complaints`.
INTAKE_MAX_UPLOAD_BYTES = env_int("INTAKE_MAX_UPLOAD_BYTES", 512 * 1024 * 1024, minimum=1)
# Rows written per transaction: each chunk commits its cases, events, audit records and progress.
INTAKE_CHUNK_ROWS = env_int("INTAKE_CHUNK_ROWS", 500, minimum=1)

# --- E-mail intake: complaints by e-mail (intake/, docs/adr/0034-email-intake.md) -------------
# The provider whose inbound webhook posts to /inbound/email/ (anymail's view for it checks the
# signature): mailgun (the default) or postmark.
INBOUND_EMAIL_PROVIDER = env_str("INBOUND_EMAIL_PROVIDER", "mailgun")
# Mail to <organisation slug>@INBOUND_EMAIL_DOMAIN is that organisation's.
INBOUND_EMAIL_DOMAIN = env_str("INBOUND_EMAIL_DOMAIN", "inbound.arbiter.example")
# Mailgun's HTTP webhook signing key (anymail's own setting name); with it unset every Mailgun POST is refused.
ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY = env_str("ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY", "")
# For a provider that signs nothing (postmark): the webhook's basic-auth "user:password".
ANYMAIL_WEBHOOK_SECRET = env_str("ANYMAIL_WEBHOOK_SECRET", "")
# A delivery larger than this (bytes, the whole request) is refused, its reason recorded.
INBOUND_EMAIL_MAX_BYTES = env_int("INBOUND_EMAIL_MAX_BYTES", 10 * 1024 * 1024, minimum=1)
# A message the provider scores above this (or flags as spam) is refused, its reason recorded.
INBOUND_EMAIL_MAX_SPAM_SCORE = float(env_str("INBOUND_EMAIL_MAX_SPAM_SCORE", "5.0"))
