"""Security: HTTPS, cookies and HSTS, the proxy header, the Content-Security-Policy, the login
lockout (django-axes) and the client address behind trusted proxies."""

import ipaddress
from datetime import timedelta

from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list
from config.settings.base import DEBUG

# --- Security: HTTPS, cookies, HSTS, proxy header -----------------------------------
# Secure by default without DEBUG; each can be turned off explicitly (e.g. SECURE_SSL_REDIRECT=0
# when a proxy in front already redirects). `manage.py check --deploy` is clean with the README's
# production settings (tests/ops/test_deploy_settings.py runs it).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
# HSTS: browsers refuse plain HTTP to this host for that many seconds once they saw the header over
# HTTPS. Preload only matters once the domain is submitted to the browsers' preload list.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
# Opt-in, only behind a proxy that sets it and strips it from clients: "HEADER,value", e.g.
# HTTP_X_FORWARDED_PROTO,https. Without it, requests the proxy received over HTTPS look like HTTP.
_proxy_ssl_header = env_list("SECURE_PROXY_SSL_HEADER", [])
if _proxy_ssl_header:
    if len(_proxy_ssl_header) != 2 or not _proxy_ssl_header[0].startswith("HTTP_"):
        raise ImproperlyConfigured("SECURE_PROXY_SSL_HEADER must be 'HTTP_<HEADER>,<value>', e.g. "
                                   "HTTP_X_FORWARDED_PROTO,https.")
    SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header)

# --- Content-Security-Policy (django-csp 4) ----------------------------------------------
# No inline script or style except with the per-request nonce (the Swagger UI page, ops/templates);
# htmx's own indicator <style> is turned off in templates/base.html. CSP_REPORT_ONLY=1 sends the
# policy as Content-Security-Policy-Report-Only (to try a change without breaking pages).

_csp = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        # + the hash of templates/500.html's inline style (rendered without a request, so no nonce;
        # tests/ops/test_probes_and_metrics.py fails if that style changes without this hash).
        "style-src": [SELF, NONCE, "'sha256-SlPdcaoFrHx4FSrJO/vLwa6hRjKVc3rJCmZMn7l5p/c='"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
if env_bool("CSP_REPORT_ONLY", False):
    CONTENT_SECURITY_POLICY_REPORT_ONLY = _csp
    CONTENT_SECURITY_POLICY = None
else:
    CONTENT_SECURITY_POLICY = _csp

# --- Login throttling and lockout (django-axes) --------------------------------------
# After AXES_FAILURE_LIMIT failed logins for one username from one address (login page, admin,
# HTTP Basic on the API), that pair is locked out — the right password included — for
# AXES_COOLOFF_MINUTES; the lockout is written to the audit ledger (ops/security.py).

AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_ENABLED = env_bool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_LOCKOUT_CALLABLE = "ops.security.lockout_response"  # 429 + Retry-After; {code, detail} under /api/

# --- Client addresses and shared rate limits (ADR 0016; core/client_address.py, core/ratelimit.py) --
# The client's address is REMOTE_ADDR unless proxies in front are trusted: with COUNT = N, the N
# right-most hops (REMOTE_ADDR, then X-Forwarded-For from its right end) are proxies and the next
# hop is the client; with NETWORKS, only hops inside those networks count as proxies (and with both,
# a hop must pass both). Every throttle, the login lockout and the request log use this address.
ARBITER_TRUSTED_PROXY_COUNT = env_int("ARBITER_TRUSTED_PROXY_COUNT", 0, minimum=0)
ARBITER_TRUSTED_PROXY_NETWORKS = env_list("ARBITER_TRUSTED_PROXY_NETWORKS", [])

for _network in ARBITER_TRUSTED_PROXY_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"ARBITER_TRUSTED_PROXY_NETWORKS: {_network!r} is not a network like "
                                   "10.0.0.0/8 or an address.") from None
AXES_CLIENT_IP_CALLABLE = "core.client_address.client_address"
