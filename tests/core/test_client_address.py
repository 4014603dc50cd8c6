"""The client's address: REMOTE_ADDR unless proxies are trusted, then the right-most hop that is
not a trusted proxy; never a value the client chose."""

import importlib

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from core.client_address import client_address, parse_address


def _request(remote="203.0.113.7", forwarded=None):
    meta = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/", **meta)


def test_with_no_trusted_proxy_the_forwarded_header_is_ignored(settings):
    settings.ARBITER_TRUSTED_PROXY_COUNT = 0
    settings.ARBITER_TRUSTED_PROXY_NETWORKS = []
    assert client_address(_request("203.0.113.7", "127.0.0.1")) == "203.0.113.7"
    assert client_address(_request("203.0.113.7", "1.1.1.1, 2.2.2.2")) == "203.0.113.7"


def test_with_one_trusted_proxy_the_client_is_the_right_most_forwarded_hop(settings):
    settings.ARBITER_TRUSTED_PROXY_COUNT = 1
    # The client wrote "6.6.6.6" itself; the proxy (REMOTE_ADDR) appended the address it saw.
    assert client_address(_request("10.0.0.2", "6.6.6.6, 198.51.100.9")) == "198.51.100.9"
    assert client_address(_request("10.0.0.2", "198.51.100.9")) == "198.51.100.9"


def test_with_two_trusted_proxies_the_client_is_the_second_hop_from_the_right(settings):
    settings.ARBITER_TRUSTED_PROXY_COUNT = 2
    assert client_address(_request("10.0.0.2", "6.6.6.6, 198.51.100.9, 10.0.0.1")) == "198.51.100.9"


def test_a_chain_shorter_than_the_count_yields_its_left_most_hop(settings):
    settings.ARBITER_TRUSTED_PROXY_COUNT = 2
    assert client_address(_request("10.0.0.2", "198.51.100.9")) == "198.51.100.9"
    assert client_address(_request("10.0.0.2")) == "10.0.0.2"


def test_trusted_networks_skip_only_hops_inside_them(settings):
    settings.ARBITER_TRUSTED_PROXY_COUNT = 0
    settings.ARBITER_TRUSTED_PROXY_NETWORKS = ["10.0.0.0/8"]
    assert client_address(_request("10.0.0.2", "6.6.6.6, 198.51.100.9, 10.1.2.3")) == "198.51.100.9"
    # A connection from outside the proxies' networks is its own client, whatever it forwards.
    assert client_address(_request("203.0.113.7", "10.9.9.9")) == "203.0.113.7"


def test_count_and_networks_together_require_both(settings):
    settings.ARBITER_TRUSTED_PROXY_COUNT = 1
    settings.ARBITER_TRUSTED_PROXY_NETWORKS = ["10.0.0.0/8"]
    assert client_address(_request("10.0.0.2", "10.1.1.1, 10.3.3.3")) == "10.3.3.3"  # the count stops it
    assert client_address(_request("203.0.113.7", "198.51.100.9")) == "203.0.113.7"  # not a proxy network


def test_garbage_where_the_client_should_be_falls_back_to_the_proxy_that_reported_it(settings):
    settings.ARBITER_TRUSTED_PROXY_COUNT = 1
    assert client_address(_request("10.0.0.2", "1.1.1.1, not-an-address")) == "10.0.0.2"


@pytest.mark.parametrize("text, expected", [
    ("198.51.100.9", "198.51.100.9"), (" 198.51.100.9:4431 ", "198.51.100.9"), ("[2001:db8::1]:80", "2001:db8::1"),
    ("2001:db8::1", "2001:db8::1"), ("::ffff:198.51.100.9", "198.51.100.9"), ("unknown", None), ("", None),
])
def test_hops_are_parsed_as_proxies_write_them(text, expected):
    parsed = parse_address(text)
    assert (str(parsed) if parsed is not None else None) == expected


def test_a_bad_trusted_network_stops_the_process(monkeypatch):
    from config.settings import security as project_settings  # the module of the client-address settings

    monkeypatch.setenv("ARBITER_TRUSTED_PROXY_NETWORKS", "10.0.0.0/8,not-a-network")
    monkeypatch.setenv("DEBUG", "1")
    try:
        with pytest.raises(ImproperlyConfigured, match="not-a-network"):
            importlib.reload(project_settings)
    finally:
        monkeypatch.delenv("ARBITER_TRUSTED_PROXY_NETWORKS")
        importlib.reload(project_settings)


def test_the_login_lockout_uses_the_same_address(settings):
    from axes.helpers import get_client_ip_address

    settings.ARBITER_TRUSTED_PROXY_COUNT = 0
    assert get_client_ip_address(_request("203.0.113.7", "127.0.0.1")) == "203.0.113.7"
    settings.ARBITER_TRUSTED_PROXY_COUNT = 1
    assert get_client_ip_address(_request("10.0.0.2", "6.6.6.6, 198.51.100.9")) == "198.51.100.9"
