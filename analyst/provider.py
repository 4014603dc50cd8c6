"""Provider "offline": the deterministic, network-free analyst (analyst/) behind the Provider
contract. Its answers take the same path as a real model's: built as JSON text, then parsed and
validated by `request.output_schema.model_validate_json`."""

from __future__ import annotations

import json
import time

from pydantic import ValidationError

from analyst.classifier import classifier_train
from analyst.registry import AGENTS
from core.tokens import count_message_tokens, count_tokens
from runs.providers import ModelOutputError, ModelRequest, ModelResponse, ProviderError


class OfflineAnalyst:
    name = "offline"
    model = "arbiter-offline-1"

    @classmethod
    def from_settings(cls) -> OfflineAnalyst:
        return cls()

    def prepare(self, *, say=None) -> None:
        """Train the classifier here if no artifact exists yet (a no-op when it does): a process
        driving a run inline has no worker to ask, and must not train inside the step."""
        classifier_train(say=say)

    def complete(self, request: ModelRequest) -> ModelResponse:
        agent = request.agent or str((request.context or {}).get("agent") or "")
        if agent not in AGENTS:
            raise ProviderError(
                f"The offline analyst has no agent named {agent!r}; it answers for: {', '.join(sorted(AGENTS))}.",
                retryable=False)
        answer, schema = AGENTS[agent]
        if not issubclass(request.output_schema, schema):
            raise ProviderError(
                f"The offline {agent} agent answers with {schema.__name__}, but the request asks for "
                f"{request.output_schema.__name__}; fix the node's output schema.", retryable=False)
        started = time.perf_counter()
        raw = json.dumps(answer(dict(request.context or {})), ensure_ascii=False)
        try:
            output = request.output_schema.model_validate_json(raw)
        except ValidationError as error:
            # Deterministic: a retry would produce the same text, so the one attempt is final.
            raise ModelOutputError(f"The offline {agent} agent produced output that fails "
                                   f"{request.output_schema.__name__}: {error.error_count()} error(s).",
                                   raw=raw, errors=str(error), attempts=1) from error
        latency_ms = int(round((time.perf_counter() - started) * 1000))
        prompt_tokens = count_message_tokens(request.messages) if request.messages else \
            count_tokens(json.dumps(request.context or {}, ensure_ascii=False, default=str))
        return ModelResponse(output=output, raw=raw, provider=self.name, model=self.model,
                             prompt_tokens=prompt_tokens, completion_tokens=count_tokens(raw),
                             latency_ms=latency_ms, attempts=1)
