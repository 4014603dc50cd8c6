"""/api/schema/ generated once per process and served from memory.

Building the OpenAPI description walks every view and serializer (4-14 s under load), and it only
changes with the code, so it is built on the first request and kept: the description per (API
version, language), and its rendering per media type (JSON, YAML). A deploy starts new processes,
so each deploy's schema is generated once per process. A change of settings (tests) forgets it."""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

_SCHEMAS: dict[tuple, dict] = {}
_RENDERED: dict[tuple, tuple[bytes, str]] = {}
_LOCK = threading.Lock()


def schema_cache_clear() -> None:
    with _LOCK:
        _SCHEMAS.clear()
        _RENDERED.clear()


@receiver(setting_changed)
def _settings_changed(**kwargs) -> None:
    schema_cache_clear()


class CachedSchemaView(SpectacularAPIView):
    def _cache_key(self, request) -> tuple:
        version = self.api_version or request.version or self._get_version_parameter(request)
        return version, translation.get_language() if settings.USE_I18N else None

    def _get_schema_response(self, request):
        key = self._cache_key(request)
        schema = _SCHEMAS.get(key)
        if schema is None:
            with _LOCK:  # concurrent first requests wait for one generation instead of each running it
                schema = _SCHEMAS.get(key)
                if schema is None:
                    generator = self.generator_class(urlconf=self.urlconf, api_version=key[0], patterns=self.patterns)
                    schema = _SCHEMAS[key] = generator.get_schema(request=request, public=self.serve_public)
        filename = self._get_filename(request, key[0])
        return Response(data=schema, headers={"Content-Disposition": f'inline; filename="{filename}"'})

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code != 200 or not isinstance(response, Response):
            return response
        key = (*self._cache_key(request), response.accepted_media_type)
        rendered = _RENDERED.get(key)
        if rendered is None:
            response.render()
            _RENDERED[key] = (response.content, response["Content-Type"])
        else:
            # Setting the content marks the response rendered: the renderer does not run again.
            response.content, response["Content-Type"] = rendered
        return response
