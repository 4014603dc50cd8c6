"""The contract between the run executor and the model behind an agent, and the choice of one.

The executor builds a ModelRequest (rendered prompt messages + the structured context the
prompt was rendered from + the pydantic schema the answer must satisfy) and calls
`provider.complete(request)`. Every provider returns a ModelResponse whose `output` is an
instance of `request.output_schema`, or raises:
  - ModelOutputError: the model answered but its output failed validation twice (the first
    failure is retried once with the validation error appended); `raw` and `errors` say why.
  - ProviderError: transport trouble (timeout, 429, 5xx, connection refused); `retryable` says
    whether a later attempt may succeed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from pydantic import BaseModel


class ProviderError(Exception):
    def __init__(self, message: str, *, retryable: bool = True, status_code: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code


class ModelOutputError(Exception):
    def __init__(self, message: str, *, raw: str, errors: str, attempts: int):
        super().__init__(message)
        self.raw = raw
        self.errors = errors
        self.attempts = attempts


@dataclass
class ModelRequest:
    agent: str  # the specialist asking: "triage", "evidence_analyst", "risk_assessor", "chat", ...
    output_schema: type[BaseModel]
    # Chat-completions style messages: [{"role": "system"|"user"|"assistant", "content": str}].
    # Evidence and user messages inside them are wrapped as delimited untrusted data.
    messages: list[dict[str, str]]
    # The structured facts the messages were rendered from (case snapshot, evidence excerpts with
    # ids, findings so far, memory, thread turns). The offline analyst reasons over this directly.
    context: dict[str, Any] = field(default_factory=dict)
    max_output_tokens: int = 1200


@dataclass
class ModelResponse:
    output: BaseModel
    raw: str
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    attempts: int = 1


class Provider(Protocol):
    name: str
    model: str

    def complete(self, request: ModelRequest) -> ModelResponse: ...

    # Optional: `prepare(say)` readies what the provider needs before its first step, outside any
    # step's time limit (the offline analyst trains its classifier if no artifact exists). A process
    # that is its own worker (`--inline` commands) calls it before driving a run; a worker pool relies
    # on the deployment doing it (`manage.py train_analyst`) or on the provider asking a worker.


def prepare_provider(name: str | None = None, *, say=None) -> None:
    """Call the provider's optional `prepare(say=...)` (see Provider)."""
    prepare = getattr(get_provider(name), "prepare", None)
    if prepare is not None:
        prepare(say=say)


# --- choosing a provider -------------------------------------------------------------------
#
# The engine knows providers only by name: settings.ARBITER_PROVIDERS maps each name to the dotted
# path of a class with a `from_settings()` constructor (the agents package ships the
# openai-compatible one, the analyst package the offline one). A misconfiguration raises
# ImproperlyConfigured saying what to set when the provider is chosen, not half-way through a run.


def provider_names() -> tuple[str, ...]:
    return tuple(settings.ARBITER_PROVIDERS)


def usable_provider_names() -> tuple[str, ...]:
    """The configured providers this deployment can use now: their class imports and its
    `from_settings()` finds what it needs (an openai-compatible provider without OPENAI_BASE_URL
    cannot). The API's schema lists exactly these, so a name the schema allows starts a run."""
    usable = []
    for name in provider_names():
        try:
            get_provider(name)
        except (ImproperlyConfigured, ImportError):
            continue
        usable.append(name)
    return tuple(usable)


def preload_providers() -> None:
    """Import every configured provider's code. A serving process calls it at start (config.wsgi):
    the offline analyst's import (scikit-learn) took 11 s on a loaded machine, which the first
    request starting a run paid otherwise. A provider whose code does not import is left out here,
    as usable_provider_names leaves it out."""
    for path in settings.ARBITER_PROVIDERS.values():
        try:
            import_string(path)
        except ImportError:
            continue


def get_provider(name: str | None = None) -> Provider:
    """`get_provider()` is settings.ARBITER_MODEL_PROVIDER (default "offline")."""
    chosen = (name if name is not None else getattr(settings, "ARBITER_MODEL_PROVIDER", "offline") or "offline")
    chosen = chosen.strip().lower()
    try:
        path = settings.ARBITER_PROVIDERS[chosen]
    except KeyError:
        raise ImproperlyConfigured(
            f"Unknown model provider {chosen!r}: use one of {', '.join(provider_names())} "
            "(ARBITER_MODEL_PROVIDER or --provider).") from None
    return import_string(path).from_settings()
