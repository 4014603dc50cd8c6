"""Rate limits that a client cannot dodge and that never refuse someone else's valid key: the
failed-credential throttle keyed on the trusted client address and on the key presented, RateLimit-*
headers, Retry-After on 429, 503 when the counters cannot be reached — and every refusal writes
nothing."""

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from accounts.models import ApiKey
from runs.models import AgentRun
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db

CASES = "/api/v1/cases/"


def _keys_state():
    return {"keys": lambda: sorted(ApiKey.objects.values_list("pk", "last_used_at")),
            "runs": AgentRun.objects.count}


def test_rotating_x_forwarded_for_does_not_escape_the_failed_credential_throttle(bearer, settings):
    settings.ARBITER_API_THROTTLE_AUTH_FAILURE = "3/minute"
    settings.ARBITER_TRUSTED_PROXY_COUNT = 0
    statuses = [bearer("arb_nope_secret").get(CASES, HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").status_code
                for n in range(3)]
    assert statuses == [401, 401, 401]
    with assert_nothing_changed(extra=_keys_state()):
        refused = bearer("arb_other_secret").get(CASES, HTTP_X_FORWARDED_FOR="203.0.113.200")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert refused.json()["code"] == "throttled"


def test_forged_loopback_failures_do_not_refuse_a_valid_key_sent_without_the_header(bearer, make_key):
    """The security review's case: 45 bad keys sent with `X-Forwarded-For: 127.0.0.1` (default
    limit 20/minute), then a valid key without the header, 6 times: never a 429."""
    _, key = make_key("analyst")
    for _ in range(45):
        assert bearer("arb_bad_secret").get(CASES, HTTP_X_FORWARDED_FOR="127.0.0.1").status_code in (401, 429)
    assert [bearer(key).get(CASES).status_code for _ in range(6)] == [200] * 6


def test_bad_keys_from_one_address_do_not_refuse_a_valid_key_from_that_address(bearer, make_key, settings):
    settings.ARBITER_API_THROTTLE_AUTH_FAILURE = "2/minute"
    _, key = make_key("analyst")
    for _ in range(5):
        bearer("arb_spray_secret").get(CASES, REMOTE_ADDR="10.0.0.5")
    assert bearer("arb_spray_secret").get(CASES, REMOTE_ADDR="10.0.0.5").status_code == 429
    assert bearer(key).get(CASES, REMOTE_ADDR="10.0.0.5").status_code == 200


def test_wrong_secrets_for_a_key_from_another_address_do_not_refuse_it(bearer, make_key, settings):
    settings.ARBITER_API_THROTTLE_AUTH_FAILURE = "2/minute"
    api_key, key = make_key("analyst")
    guess = f"arb_{api_key.prefix}_{'x' * 43}"
    for _ in range(3):
        bearer(guess).get(CASES, REMOTE_ADDR="10.0.0.66")
    with assert_nothing_changed(extra=_keys_state()):
        guessing = bearer(guess).get(CASES, REMOTE_ADDR="10.0.0.66")
    assert guessing.status_code == 429
    # The owner, elsewhere, is not refused: the prefix's failures were all another address's ...
    assert bearer(key).get(CASES, REMOTE_ADDR="10.0.0.7").status_code == 200
    # ... while from the guessing address, that key is not even checked until the window passes.
    with assert_nothing_changed(extra=_keys_state()):
        same_place = bearer(key).get(CASES, REMOTE_ADDR="10.0.0.66")
    assert same_place.status_code == 429 and int(same_place["Retry-After"]) > 0


def test_with_one_trusted_proxy_failures_count_against_the_right_most_forwarded_hop(bearer, settings):
    settings.ARBITER_API_THROTTLE_AUTH_FAILURE = "2/minute"
    settings.ARBITER_TRUSTED_PROXY_COUNT = 1
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    for forged in ("6.6.6.1", "6.6.6.2"):
        response = bearer("arb_nope_secret").get(CASES, HTTP_X_FORWARDED_FOR=f"{forged}, 198.51.100.9", **proxy)
        assert response.status_code == 401
    # A different left-most (client-written) entry is the same client: refused.
    assert bearer("arb_nope_secret").get(CASES, HTTP_X_FORWARDED_FOR="6.6.6.3, 198.51.100.9",
                                         **proxy).status_code == 429
    # Another client behind the same proxy, with another key, is not.
    assert bearer("arb_else_secret").get(CASES, HTTP_X_FORWARDED_FOR="198.51.100.10", **proxy).status_code == 401


def test_run_starts_carry_rate_limit_headers_and_a_refusal_says_retry_after(api, analyst, case, settings):
    settings.ARBITER_API_THROTTLE_RUN_START = "2/minute"
    client = api(analyst)
    first = client.post("/api/v1/runs/", {"case": case.reference}, format="json")
    assert first.status_code == 202
    assert (first["RateLimit-Limit"], first["RateLimit-Remaining"]) == ("2", "1")
    assert 1 <= int(first["RateLimit-Reset"]) <= 60
    assert client.post("/api/v1/runs/", {"case": case.reference}, format="json")["RateLimit-Remaining"] == "0"
    with assert_nothing_changed(case, extra=_keys_state()):
        refused = client.post("/api/v1/runs/", {"case": case.reference}, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert (refused["RateLimit-Limit"], refused["RateLimit-Remaining"]) == ("2", "0")
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "RateLimit-Limit" not in client.get("/api/v1/runs/")  # reads are not limited


def test_failed_credentials_carry_rate_limit_headers(bearer, settings):
    settings.ARBITER_API_THROTTLE_AUTH_FAILURE = "5/minute"
    response = bearer("arb_nope_secret").get(CASES)
    assert response.status_code == 401
    assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == ("5", "4")


def test_an_unreachable_counter_store_is_a_503_and_starts_nothing(api, analyst, case, monkeypatch, settings):
    from django.core.cache import cache

    def down(*args, **kwargs):
        raise RedisConnectionError("connection refused")

    monkeypatch.setattr(cache, "add", down)
    with assert_nothing_changed(case, extra=_keys_state()):
        response = api(analyst).post("/api/v1/runs/", {"case": case.reference}, format="json")
    assert response.status_code == 503 and response.json()["code"] == "rate_limit_unavailable"
    assert response["Retry-After"] == str(settings.ARBITER_OUTAGE_RETRY_AFTER_SECONDS)
