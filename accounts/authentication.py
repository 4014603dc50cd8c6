"""`Authorization: Bearer <API key>` for the REST API, with failed attempts throttled per
credential and per client address, so that nobody can lock out somebody else's valid key.

A missing header is not a failure (the next authentication class may apply; with none, the answer
is 401 with `WWW-Authenticate: Bearer`). A wrong, revoked, expired or malformed key is a failure;
it is counted (core.ratelimit, shared by every process) against three things, each allowed
ARBITER_API_THROTTLE_AUTH_FAILURE failures per window:
- the client address (core.client_address: X-Forwarded-For counts only as far as trusted proxies
  wrote it);
- the key prefix presented (the part before the secret names one key);
- that prefix from that address.
A failure past any of the three limits is answered 429 with Retry-After instead of 401.

A key that is valid is always accepted, whatever the failures counted against its address or its
prefix — except when that very prefix has failed too often from that very address: then the
secret is not even checked (429) until the window passes, which is what stops guessing one key's
secret. So failures from another address, or with another key, never refuse a valid key."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from accounts.models import ApiKey
from accounts.services import api_key_matches, api_key_parse, api_key_touch
from core.client_address import client_address
from core.ratelimit import RateDecision, rate_hit, rate_peek

BAD_KEY = "Invalid, revoked or expired API key."
SCOPE = "auth_failure"


class FailedCredentials:
    """The failure counts of one request: its address, the key prefix it presented (if any), and
    the pair."""

    def __init__(self, request, prefix: str | None):
        self.request = request
        self.address = client_address(request)
        self.prefix = prefix

    def _rate(self) -> str:
        return settings.ARBITER_API_THROTTLE_AUTH_FAILURE

    def _pair_ident(self) -> str:
        return f"pair:{self.prefix}:{self.address}"

    def refuse_if_pair_exhausted(self) -> None:
        """429 before the secret is checked when this prefix failed too often from this address."""
        if self.prefix is None:
            return
        decision = rate_peek(scope=SCOPE, ident=self._pair_ident(), rate=self._rate())
        if decision.is_exhausted:
            self.request.rate_limit = decision
            raise Throttled(wait=decision.reset_seconds,
                            detail="Too many failed authentications with this key from your address.")

    def fail(self, message: str) -> None:
        """Count the failure; raise 429 when it went past a limit, else 401 with `message`."""
        idents = [f"address:{self.address}"]
        if self.prefix is not None:
            idents += [f"prefix:{self.prefix}", self._pair_ident()]
        decisions = [rate_hit(scope=SCOPE, ident=ident, rate=self._rate()) for ident in idents]
        tightest = min(decisions, key=_tightness)
        self.request.rate_limit = tightest
        if tightest.is_over:
            raise Throttled(wait=tightest.reset_seconds,
                            detail="Too many failed authentications from your address or with this key.")
        raise AuthenticationFailed(message)


def _tightness(decision: RateDecision) -> tuple[bool, int, int]:
    """Sorts a limit that was passed first (the longest wait first), then the fewest remaining."""
    return not decision.is_over, decision.remaining, -decision.reset_seconds


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        key = None
        if len(header) == 2:
            try:
                key = header[1].decode("ascii")
            except UnicodeDecodeError:
                key = None
        parsed = api_key_parse(key) if key is not None else None
        failures = FailedCredentials(request, parsed[0] if parsed is not None else None)
        failures.refuse_if_pair_exhausted()
        if len(header) != 2:
            failures.fail("Send exactly `Authorization: Bearer <API key>`.")
        api_key = None
        if parsed is not None:
            api_key = ApiKey.objects.select_related("user", "tenant").filter(prefix=parsed[0]).first()
        now = timezone.now()
        if api_key is None or not api_key_matches(api_key, key) or not api_key.is_usable(now):
            failures.fail(BAD_KEY)
        api_key_touch(api_key=api_key, now=now)
        return api_key.user, api_key

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """How the schema documents the API key (drf-spectacular finds it when this module is imported)."""

    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "arb_<prefix>_<secret>",
                "description": "An API key: `manage.py api_key create` or the admin. Sent as "
                               "`Authorization: Bearer <key>`."}
