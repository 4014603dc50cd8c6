"""The production settings of the README pass `manage.py check --deploy` with no warning, are
secure by default without DEBUG, and refuse a malformed proxy header."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Starts manage.py processes of its own, which read settings and never the suite's database.
pytestmark = [pytest.mark.slow, pytest.mark.engine_independent]

ROOT = Path(__file__).resolve().parents[2]

# The README's "Production" environment (the values an operator must choose are examples here).
PRODUCTION = {
    "SECRET_KEY": "x8Vq2-documented-production-settings-test-key-5bN7rT0wLz9pKc3MhY",
    "DEBUG": "0",
    "ALLOWED_HOSTS": "arbiter.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://arbiter.example.org",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
    "DATABASE_URL": "postgres://arbiter:secret@db.internal:5432/arbiter",  # not connected to by `check`
    "CELERY_BROKER_URL": "redis://redis.internal:6379/0",
    "ARBITER_METRICS_TOKEN": "documented-production-metrics-token",
    "ARBITER_AUDIT_KEYS": "k1:ZG9jdW1lbnRlZC1wcm9kdWN0aW9uLWF1ZGl0LWtleS0zMmI=",
}


def _manage(tmp_path, *args, **env):
    clean = {key: value for key, value in os.environ.items()
             if not key.startswith(("SECURE_", "SESSION_", "CSRF_", "DJANGO_", "DATABASE_URL", "CELERY_", "DEBUG",
                                    "LOG_", "CSP_", "AXES_"))}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=clean | {"ARBITER_VAR_DIR": str(tmp_path)} | env)


def test_check_deploy_is_clean_under_the_documented_production_settings(tmp_path):
    result = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_without_debug_cookies_hsts_and_the_https_redirect_are_on_by_default(tmp_path):
    script = ("from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, "
              "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
              "s.SECURE_PROXY_SSL_HEADER, s.CONTENT_SECURITY_POLICY['DIRECTIVES']['script-src'])")
    result = _manage(tmp_path, "shell", "-v", "0", "-c", script, **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == (
        "True True True 31536000 True ('HTTP_X_FORWARDED_PROTO', 'https') [\"'self'\", csp.constants.NONCE]")
    assert (tmp_path / "celerybeat-schedule").parent.is_dir()


def test_the_debug_defaults_allow_plain_http_for_make_run(tmp_path):
    script = "from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.SECURE_HSTS_SECONDS)"
    result = _manage(tmp_path, "shell", "-v", "0", "-c", script, DEBUG="1")
    assert result.stdout.strip() == "False False 0", result.stderr


def test_a_malformed_proxy_header_stops_the_process_with_its_name(tmp_path):
    result = _manage(tmp_path, "check", **(PRODUCTION | {"SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto"}))
    assert result.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER must be 'HTTP_<HEADER>,<value>'" in result.stderr
