"""Settings for the test suite: the real settings with a throwaway secret and test-only knobs."""

import os

os.environ.setdefault("SECRET_KEY", "tests-only-secret-key-not-for-any-deployment")
os.environ.setdefault("ARBITER_VAR_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test"))

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests only
