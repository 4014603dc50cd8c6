"""Settings for the test suite: the real settings with a throwaway secret and test-only knobs."""

import os

from audit.keys import development_key_ring, key_ring_setting

os.environ.setdefault("SECRET_KEY", "tests-only-secret-key-not-for-any-deployment")
# Each pytest-xdist worker (PYTEST_XDIST_WORKER = gw0, gw1, …) gets its own var/ folder: the Celery
# filesystem broker, the e-mail outbox and uploads of two workers never meet.
os.environ.setdefault("ARBITER_VAR_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test",
                                                      os.environ.get("PYTEST_XDIST_WORKER", "main")))
# The audit ledger's development key (derived from the throwaway secret, key id "development-only"),
# as DEBUG would use; set here because the suite runs without DEBUG, where a key is required.
os.environ.setdefault("ARBITER_AUDIT_KEYS", key_ring_setting(development_key_ring(os.environ["SECRET_KEY"])))
# The offline analyst's trained classifier is shared by every xdist worker and kept between runs of
# the suite: it is trained once (under a file lock) and only when its data or training code change.
os.environ.setdefault("ARBITER_ANALYST_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test",
                                                          "analyst"))

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests only

# The suite talks plain HTTP to the test client and the live server, so the HTTPS-only
# defaults of DEBUG=0 are off here (tests/ops/test_deploy_settings.py checks those defaults in a
# process of its own). Static files come from the finders: no collectstatic before a test run.
for _name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
    globals()[_name] = os.environ.get(_name, "0") not in ("0", "false", "no", "off", "")
SECURE_HSTS_SECONDS = 0
WHITENOISE_USE_FINDERS = True
# Looked up per request, as DEBUG would: otherwise every test client's new middleware chain scans
# and stats all static files (about 20 ms each, in ~2,000 tests of a pass).
WHITENOISE_AUTOREFRESH = True
STATIC_ROOT = VAR_DIR / "staticfiles"  # noqa: F405
STATIC_ROOT.mkdir(parents=True, exist_ok=True)

# How long the PostgreSQL mix test (tests/integrations/test_mix_concurrency.py) runs its 20 writers:
# short for CI; ADR 0028 reports the 60-second figure (ARBITER_MIX_TEST_SECONDS=60).
ARBITER_MIX_TEST_SECONDS = int(os.environ.get("ARBITER_MIX_TEST_SECONDS", "15"))
# E-mail intake: the tests sign Mailgun webhook POSTs with this key.
ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY = "tests-only-mailgun-signing-key"
