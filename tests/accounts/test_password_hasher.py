"""The configured password hasher (accounts.hashers, ADR 0023): its iteration count comes from a
setting, and a hash stored at another count still logs in and is re-hashed at the setting's count."""

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher, identify_hasher, make_password
from django.test import override_settings
from django.urls import reverse

from accounts.models import User

pytestmark = pytest.mark.django_db

HASHERS = ["accounts.hashers.ConfiguredPBKDF2PasswordHasher"]  # as config/settings/base.py has it


def iterations(encoded: str) -> int:
    return int(encoded.split("$")[1])


@override_settings(PASSWORD_HASHERS=HASHERS, ARBITER_PASSWORD_ITERATIONS=100_000)
def test_new_hashes_use_the_configured_count():
    encoded = make_password("a long enough password")
    assert encoded.startswith("pbkdf2_sha256$100000$")
    assert identify_hasher(encoded).iterations == 100_000


@override_settings(PASSWORD_HASHERS=HASHERS, ARBITER_PASSWORD_ITERATIONS=100_000)
def test_a_hash_at_the_old_count_logs_in_and_is_rehashed(client, supervisor):
    old = PBKDF2PasswordHasher().encode("a long enough password", PBKDF2PasswordHasher().salt())
    assert iterations(old) == PBKDF2PasswordHasher.iterations != 100_000
    User.objects.filter(pk=supervisor.pk).update(password=old)
    response = client.post(reverse("login"), {"username": supervisor.username, "password": "a long enough password"})
    assert response.status_code == 302
    supervisor.refresh_from_db()
    assert iterations(supervisor.password) == 100_000 and supervisor.check_password("a long enough password")


@override_settings(PASSWORD_HASHERS=HASHERS, ARBITER_PASSWORD_ITERATIONS=100_000)
def test_a_wrong_password_is_refused_and_the_hash_is_kept(client, supervisor):
    old = PBKDF2PasswordHasher().encode("a long enough password", PBKDF2PasswordHasher().salt())
    User.objects.filter(pk=supervisor.pk).update(password=old)
    response = client.post(reverse("login"), {"username": supervisor.username, "password": "wrong"})
    assert response.status_code == 200
    supervisor.refresh_from_db()
    assert supervisor.password == old


def test_the_setting_refuses_a_count_below_the_floor(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from config.env import env_int

    monkeypatch.setenv("ARBITER_PASSWORD_ITERATIONS", "1000")
    with pytest.raises(ImproperlyConfigured):
        env_int("ARBITER_PASSWORD_ITERATIONS", 150_000, minimum=100_000)
