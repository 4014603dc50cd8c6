""".env.example documents every variable the settings (config/settings/) read, and nothing that does not exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ_BY_SCRIPTS = {"DEMO_PASSWORD", "HOST", "PORT"}  # seed_demo and `make run`, not settings
# `make serve` (scripts/run_local.py), config/gunicorn.conf.py and prometheus_client read these, not settings.
READ_BY_SCRIPTS |= {"WEB_CONCURRENCY", "GUNICORN_TIMEOUT", "GUNICORN_THREADS", "PROMETHEUS_MULTIPROC_DIR"}


def _settings_variables() -> set[str]:
    source = "\n".join(path.read_text() for path in sorted((ROOT / "config" / "settings").glob("*.py")))
    return set(re.findall(r"env_(?:str|int|bool|list)\(\s*\"([A-Z][A-Z0-9_]*)\"", source))


def _documented_variables() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#?\s?([A-Z][A-Z0-9_]*)=", text, re.MULTILINE))


def test_every_setting_is_documented_in_env_example():
    variables = _settings_variables()
    assert {"DEBUG", "SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "EMAIL_BACKEND"} <= variables
    missing = sorted(variables - _documented_variables())
    assert missing == [], f"add these to .env.example with their default and meaning: {missing}"


def test_env_example_documents_nothing_that_does_not_exist():
    stale = sorted(_documented_variables() - _settings_variables() - READ_BY_SCRIPTS)
    assert stale == [], f"these are in .env.example but nothing reads them: {stale}"
