"""Where a webhook may be sent: public internet addresses only, unless the operator allows a network.

A webhook URL is chosen by a tenant's supervisor, and the worker that delivers it sits inside the
operator's network. Without a check a URL could make the worker POST to the database, the metadata
service or any listener on loopback. So the host is checked at registration and again at every
delivery (a name may resolve elsewhere later), and the connection goes to the very address that
was checked (`PinnedHTTPConnection`), so a second DNS answer cannot slip in between.

An address is refused when it is loopback, private, link-local, carrier-grade NAT, multicast,
reserved, unspecified or otherwise not global, or when it is an IPv6 form that carries such an
IPv4 address (mapped, compatible, 6to4, NAT64). A host written as a number is read the way the
resolver reads it (`socket.inet_aton`: 2130706433, 0x7f.1, 127.1 and 0177.0.0.1 are all
127.0.0.1). ARBITER_WEBHOOK_ALLOWED_NETWORKS names networks that may be reached anyway (receivers
on premises)."""

from __future__ import annotations

import functools
import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from core.errors import DomainError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CARRIER_GRADE_NAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the last 32 bits are IPv4
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use translation: never public
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


class TargetRefused(Exception):
    """The URL may not be delivered to. `category` is what a delivery records, `reason` what a
    registration tells the user (scheme, credentials, host, port, dns, address); `detail` is for
    the operator's log only (it may name an internal address)."""

    def __init__(self, category: str, detail: str, *, reason: str = ""):
        super().__init__(detail)
        self.category = category
        self.reason = reason or category
        self.detail = detail


class ResolverUnavailable(DomainError):
    """The resolver failed for a while (not an answer about the name): try again later."""

    code = "unavailable"
    http_status = 503


@dataclass(frozen=True)
class Target:
    """A checked webhook URL: where to connect (`addresses`, every one checked) and what to send
    as Host header and TLS server name (`host`)."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[IPAddress, ...]


def resolve_host(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host`. Tests replace this function (no
    network in tests), e.g. to make a name resolve to loopback."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def literal_address(host: str) -> IPAddress | None:
    """The address a host written as a number stands for, read as the resolver reads it, or None
    for a name. `inet_aton` accepts the short, decimal, octal and hex forms of IPv4."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if ":" in host:
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=8)
def _networks(values: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in values)


def _is_allowed(address: IPAddress) -> bool:
    allowed = _networks(tuple(settings.ARBITER_WEBHOOK_ALLOWED_NETWORKS))
    return any(address.version == network.version and address in network for network in allowed)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: IPAddress) -> str | None:
    """Why `address` may not be reached (a short kind, for the log), or None when it may."""
    if _is_allowed(address):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # the connection goes to the IPv4 address itself
            return address_refusal(address.ipv4_mapped)
        if address in _NAT64:  # a DNS64 answer for an IPv4-only host: judged by that IPv4 address
            return address_refusal(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        embedded = _embedded_ipv4(address)
        kind = address_refusal(embedded) if embedded is not None else None
        if kind:
            return f"{kind} (embedded in {address})"
    checks = (("loopback", address.is_loopback), ("unspecified", address.is_unspecified),
              ("link-local", address.is_link_local), ("multicast", address.is_multicast),
              ("carrier-grade NAT", address in _CARRIER_GRADE_NAT), ("private", address.is_private),
              ("reserved", address.is_reserved), ("not global", not address.is_global),
              ("local NAT64", address in _NAT64_LOCAL))
    return next((kind for kind, applies in checks if applies), None)


def _addresses(host: str, port: int) -> tuple[IPAddress, ...]:
    literal = literal_address(host)
    if literal is not None:
        return (literal,)
    try:
        found = tuple(ipaddress.ip_address(address) for address in resolve_host(host, port))
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            raise ResolverUnavailable("The name service did not answer; try again in a moment.") from exc
        raise TargetRefused("dns", f"{host} does not resolve: {exc}") from exc
    except (UnicodeError, ValueError) as exc:
        raise TargetRefused("dns", f"{host} gave no usable address: {exc}") from exc
    if not found:
        raise TargetRefused("dns", f"{host} resolves to no address")
    return found


def webhook_target(url: str) -> Target:
    """Check a webhook URL and resolve it now. Raises TargetRefused (category invalid_url: scheme,
    credentials, no host or port; dns: the name does not resolve; refused_address: ANY of its
    addresses may not be reached) or ResolverUnavailable (the name service is down)."""
    parts = urlsplit(url)
    schemes = ("https", "http") if settings.ARBITER_WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme not in schemes:
        raise TargetRefused("invalid_url", f"scheme {parts.scheme!r} is not allowed", reason="scheme")
    if "@" in parts.netloc:
        raise TargetRefused("invalid_url", "the URL holds credentials", reason="credentials")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise TargetRefused("invalid_url", f"bad port: {exc}", reason="port") from exc
    host = parts.hostname or ""
    if not host:
        raise TargetRefused("invalid_url", "the URL has no host", reason="host")
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise TargetRefused("invalid_url", f"bad host name: {exc}", reason="host") from exc
    addresses = _addresses(host, port)
    refused = [f"{address}: {kind}" for address in addresses if (kind := address_refusal(address))]
    if refused:
        raise TargetRefused("refused_address", f"{host} -> {', '.join(refused)}", reason="address")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(scheme=parts.scheme, host=host, port=port, path=path, addresses=addresses)


# --- connecting to the checked address --------------------------------------------------------------

class PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to the target's checked addresses (tried in order), never to a fresh DNS
    answer; the Host header still names the URL's host. Follows no redirect (http.client never does)."""

    def __init__(self, target: Target, *, timeout: float):
        super().__init__(target.host, target.port, timeout=timeout)
        self.target = target

    def connect(self):
        last_error: OSError | None = None
        for address in self.target.addresses:
            try:
                self.sock = socket.create_connection((str(address), self.target.port), self.timeout)
                return
            except OSError as exc:
                last_error = exc
        raise last_error or OSError("no address to connect to")


class PinnedHTTPSConnection(PinnedHTTPConnection):
    """TLS over the pinned connection: the server name (SNI) and the certificate check are the
    URL's host, so pinning the address weakens nothing."""

    default_port = 443

    def connect(self):
        super().connect()
        literal = literal_address(self.target.host)
        server_name = str(literal) if literal is not None else self.target.host
        self.sock = ssl.create_default_context().wrap_socket(self.sock, server_hostname=server_name)


def pinned_connection(target: Target, *, timeout: float) -> PinnedHTTPConnection:
    connection_class = PinnedHTTPSConnection if target.scheme == "https" else PinnedHTTPConnection
    return connection_class(target, timeout=timeout)
