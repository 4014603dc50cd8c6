"""`Authorization: Bearer <API key>` for the REST API, with failed attempts throttled per client IP.

A missing header is not a failure (the next authentication class may apply; with none, the answer
is 401 with `WWW-Authenticate: Bearer`). A wrong, revoked or expired key is a failure: it counts
against the client's IP, and past ARBITER_API_THROTTLE_AUTH_FAILURE every request from that IP
with a Bearer header is 429 with Retry-After until the window passes."""

from __future__ import annotations

from django.core.cache import cache
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiKey
from accounts.services import api_key_matches, api_key_parse, api_key_touch

BAD_KEY = "Invalid, revoked or expired API key."


class AuthFailureThrottle(SimpleRateThrottle):
    """Counts failed authentications per client IP (DRF's REMOTE_ADDR / X-Forwarded-For logic)."""

    scope = "auth_failure"

    def get_rate(self):
        from django.conf import settings

        return settings.ARBITER_API_THROTTLE_AUTH_FAILURE

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def blocked_for(self, request) -> float | None:
        """Seconds to wait when this IP is over its limit of failures, else None."""
        self.key = self.get_cache_key(request, None)
        self.history = cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) >= self.num_requests:
            return self.wait()
        return None

    def record_failure(self, request) -> None:
        self.blocked_for(request)
        self.history.insert(0, self.now)
        cache.set(self.key, self.history, self.duration)


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        throttle = AuthFailureThrottle()
        wait = throttle.blocked_for(request)
        if wait is not None:
            raise Throttled(wait=wait, detail="Too many failed authentications from your address.")
        if len(header) != 2:
            throttle.record_failure(request)
            raise AuthenticationFailed("Send exactly `Authorization: Bearer <API key>`.")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            throttle.record_failure(request)
            raise AuthenticationFailed(BAD_KEY) from None
        parsed = api_key_parse(key)
        api_key = None
        if parsed is not None:
            api_key = ApiKey.objects.select_related("user", "tenant").filter(prefix=parsed[0]).first()
        now = timezone.now()
        if api_key is None or not api_key_matches(api_key, key) or not api_key.is_usable(now):
            throttle.record_failure(request)
            raise AuthenticationFailed(BAD_KEY)
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
