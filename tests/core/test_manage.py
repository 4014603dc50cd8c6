"""manage.py without a required setting says which one, in one line, with no traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # starts manage.py
@pytest.mark.engine_independent  # fails on the missing setting before any database is opened
def test_a_missing_secret_key_is_one_line_not_a_traceback():
    env = {key: value for key, value in os.environ.items() if key not in ("DEBUG", "SECRET_KEY")}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == ("Arbiter is not configured: SECRET_KEY is required unless DEBUG=1. "
                                     "(see .env.example; DEBUG=1 for a local run)")
