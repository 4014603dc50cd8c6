"""Which representation the REST API answers: JSON, unless a person's browser asks for a page.

The rule (ADR 0022): the browsable API (HTML) only when the Accept header lists `text/html`
(with a q above 0), does not list `application/json`, and either has no wildcard entry (`*`,
`*/*`, `type/*`) or the request is a browser's navigation (`Sec-Fetch-Mode: navigate`, or
`application/xhtml+xml` listed, which every browser's page request lists and no HTTP library's
default does). Everything else is JSON, successes and errors alike: no header, `*/*`, `text/*`,
Java's default `text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2`, and types the API does not
produce (JSON is what it has; a client that cannot read it learns that from the body, not from a
406 it cannot read either). Views with other renderers (the OpenAPI schema) negotiate as DRF does."""

from __future__ import annotations

from rest_framework.negotiation import DefaultContentNegotiation

JSON = "application/json"


def _entries(header: str) -> list[str]:
    """The media types an Accept header lists with a q above 0, lower-cased, without parameters."""
    entries = []
    for item in header.split(","):
        media, *parameters = (part.strip().lower() for part in item.split(";"))
        quality = next((value for name, _, value in (p.partition("=") for p in parameters) if name == "q"), "1")
        try:
            accepted = float(quality) > 0
        except ValueError:
            accepted = True
        if media and accepted:
            entries.append(media)
    return entries


def asks_for_a_page(request) -> bool:
    """Whether this request is a person's browser asking for an HTML page (the rule above)."""
    entries = _entries(request.headers.get("Accept", ""))
    if "text/html" not in entries or JSON in entries:
        return False
    navigation = request.headers.get("Sec-Fetch-Mode", "").lower() == "navigate" or "application/xhtml+xml" in entries
    wildcard = any(entry == "*" or entry.endswith("/*") for entry in entries)
    return navigation or not wildcard


class ApiContentNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        page = next((renderer for renderer in renderers if renderer.format == "api"), None)
        json = next((renderer for renderer in renderers if renderer.media_type == JSON), None)
        if page is None or json is None or format_suffix:
            return super().select_renderer(request, renderers, format_suffix)
        if asks_for_a_page(request):
            return page, page.media_type
        return json, json.media_type
