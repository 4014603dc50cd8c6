"""Foundation: paths, DEBUG and the secret key, apps and middleware, templates, the database,
passwords and login, language and time, static and media files."""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("ARBITER_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """SECRET_KEY from the environment; a fixed development key only with DEBUG=1."""
    key = env_str("SECRET_KEY")
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required unless DEBUG=1.")
    return "insecure-dev-only-key-never-use-in-production"


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Every app and every middleware, in one place each. Order matters for the middleware: the
# request passes them top to bottom (metrics and request context first, then the probes that must
# answer before ALLOWED_HOSTS is checked, the API version header and CORS before security, static
# files and the CSP right after it) and the response bottom to top.
INSTALLED_APPS = [
    "core",  # first: its `runserver` (Nagle off, core/management/commands/runserver.py) is the one found
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
    "accounts",
    "audit",
    "cases",
    "conversations",
    "runs",
    "agents",
    "analyst",
    "intake",
    "reports",
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
                "csp.context_processors.nonce",  # the per-request nonce of the CSP (security.py)
            ],
        },
    }
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'arbiter.sqlite3'}")
# A connection kept between requests saves PostgreSQL a process start and an authentication per
# request (bench/RESULTS.md); checked before reuse, so one broken by a database restart is replaced.
# SQLite opens a file, nothing to save: closed after each request unless DB_CONN_MAX_AGE says otherwise.
DATABASES = {"default": dj_database_url.parse(
    DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 0 if DATABASE_URL.startswith("sqlite") else 60),
    conn_health_checks=True)}
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
