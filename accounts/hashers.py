"""The password hasher: Django's PBKDF2-SHA256 with its iteration count taken from a setting
(ARBITER_PASSWORD_ITERATIONS), measured on the machine that serves logins (docs/adr/0023).

The algorithm name stays "pbkdf2_sha256", so every stored hash keeps verifying whatever its
iteration count: Django reads the count from the stored hash, and on the next successful login
re-hashes a password whose count differs from the setting (`must_update`), up or down."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher


class ConfiguredPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    @property
    def iterations(self) -> int:  # read per use, so a test's override_settings takes effect
        return settings.ARBITER_PASSWORD_ITERATIONS
