"""Choosing the model behind the agents (DESIGN §5): `get_provider(name)`.

    get_provider()          -> settings.ARBITER_MODEL_PROVIDER (default "offline")
    get_provider("offline") -> OfflineAnalyst: deterministic, no network
    get_provider("openai")  -> OpenAICompatibleProvider (alias "openai-compatible"), configured by
                               OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL, OPENAI_TIMEOUT_SECONDS,
                               OPENAI_MAX_OUTPUT_TOKENS, OPENAI_REASONING_EFFORT

A misconfiguration raises ImproperlyConfigured saying what to set, when the provider is chosen —
not half-way through a run.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from runs.providers.base import ModelOutputError, ModelRequest, ModelResponse, Provider, ProviderError

PROVIDER_NAMES = ("offline", "openai", "openai-compatible")


def get_provider(name: str | None = None) -> Provider:
    chosen = (name if name is not None else getattr(settings, "ARBITER_MODEL_PROVIDER", "offline") or "offline")
    chosen = chosen.strip().lower()
    if chosen == "offline":
        from runs.providers.offline import OfflineAnalyst

        return OfflineAnalyst()
    if chosen in ("openai", "openai-compatible"):
        from runs.providers.openai_compatible import OpenAICompatibleProvider

        base_url = (getattr(settings, "OPENAI_BASE_URL", "") or "").strip()
        model = (getattr(settings, "OPENAI_MODEL", "") or "").strip()
        if not base_url:
            raise ImproperlyConfigured(
                "The openai-compatible model provider needs a server: set OPENAI_BASE_URL "
                "(e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1), or use ARBITER_MODEL_PROVIDER=offline.")
        if not model:
            raise ImproperlyConfigured(
                "The openai-compatible model provider needs a model name: set OPENAI_MODEL "
                "(the model id your server serves), or use ARBITER_MODEL_PROVIDER=offline.")
        return OpenAICompatibleProvider(base_url=base_url, api_key=getattr(settings, "OPENAI_API_KEY", "") or "",
                                        model=model, timeout=float(getattr(settings, "OPENAI_TIMEOUT_SECONDS", 60)),
                                        max_output_tokens=getattr(settings, "OPENAI_MAX_OUTPUT_TOKENS", None),
                                        reasoning_effort=getattr(settings, "OPENAI_REASONING_EFFORT", "") or "")
    raise ImproperlyConfigured(
        f"Unknown model provider {chosen!r}: use one of {', '.join(PROVIDER_NAMES)} "
        "(ARBITER_MODEL_PROVIDER or --provider).")


__all__ = ["PROVIDER_NAMES", "ModelOutputError", "ModelRequest", "ModelResponse", "Provider", "ProviderError",
           "get_provider"]
