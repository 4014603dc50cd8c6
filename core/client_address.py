"""The one answer to "which address is the client?", for every throttle, the login lockout
(django-axes' AXES_CLIENT_IP_CALLABLE) and the request log.

A client can write any X-Forwarded-For it likes, so the header is believed only as far as trusted
proxies wrote it. The hops of a request, nearest first, are REMOTE_ADDR (whoever opened the TCP
connection) and then the X-Forwarded-For entries from the right end (each proxy appends the address
it received the request from). Walking them nearest first, a hop is a trusted proxy when it is
among the first ARBITER_TRUSTED_PROXY_COUNT hops (if that is set) and inside
ARBITER_TRUSTED_PROXY_NETWORKS (if that is set); the first hop that is not is the client. With
neither set (the default) the client is REMOTE_ADDR and the header is ignored.

Every hop at or nearer than the client was written by a trusted party, so the answer cannot be
chosen by the client. Two edge cases fail closed, to the nearest trusted proxy's view:
- an entry that is not an IP address (a proxy passing on garbage) is not taken as the client: the
  hop before it (the proxy that reported it) is;
- a chain shorter than the count (a request that skipped a proxy) yields its left-most hop, which
  the nearest proxy wrote."""

from __future__ import annotations

import ipaddress
from functools import lru_cache

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_address(text: str) -> Address | None:
    """An IP address from one hop as proxies write it ("1.2.3.4", "1.2.3.4:5678", "[::1]:80",
    "::ffff:1.2.3.4"); None for anything else."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # IPv4 with a port; a bare IPv6 address has several colons
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _hops_nearest_first(request) -> list[str]:
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    entries = [entry for entry in forwarded.split(",") if entry.strip()] if forwarded else []
    return [request.META.get("REMOTE_ADDR", ""), *reversed(entries)]


def _is_trusted(position: int, address: Address | None, *, count: int, networks: list) -> bool:
    if address is None:
        return False
    if count and position >= count:
        return False
    return not networks or any(address.version == network.version and address in network
                               for network in networks)


@lru_cache(maxsize=8)
def _networks(texts: tuple[str, ...]) -> list:
    return [ipaddress.ip_network(text, strict=False) for text in texts]


def client_address(request) -> str:
    """The client's IP address as text ("" only when the server gave no REMOTE_ADDR)."""
    count = settings.ARBITER_TRUSTED_PROXY_COUNT
    networks = _networks(tuple(settings.ARBITER_TRUSTED_PROXY_NETWORKS))
    remote = request.META.get("REMOTE_ADDR", "") or ""
    if not count and not networks:
        return remote
    hops = _hops_nearest_first(request)
    nearest_trusted = remote
    for position, hop in enumerate(hops):
        address = parse_address(hop)
        if not _is_trusted(position, address, count=count, networks=networks):
            return str(address) if address is not None else nearest_trusted
        nearest_trusted = str(address)
    return nearest_trusted  # every hop is a proxy: the left-most one, written by a trusted proxy
