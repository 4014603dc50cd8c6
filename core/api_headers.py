"""Headers on every answer under /api/: the API's version (ADR 0022).

`Arbiter-API-Version: 1` names the major version of /api/v1/ (the path's version: a change that
breaks a client gets a new path). Deprecation follows the README's policy: an operation to be
removed answers `Deprecation` and `Sunset` headers at least 6 months before it goes."""

from __future__ import annotations

API_VERSION = "1"
VERSION_HEADER = "Arbiter-API-Version"


class ApiVersionHeaderMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.path.startswith("/api/"):
            response[VERSION_HEADER] = API_VERSION
        return response
