"""Model calls of a node (NodeContext.call_model): build the context, call the provider, buffer
the ModelCall record (it commits with the step, failed or not). Split from runs.executor, which
re-exports these names."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils.module_loading import import_string

from core.tokens import count_message_tokens
from ops import metrics
from runs import providers
from runs.models import AgentRun
from runs.providers import ModelOutputError, ModelRequest, ProviderError

if TYPE_CHECKING:  # the node context calls this module (NodeContext.call_model)
    from runs.graph import NodeContext


class StepFailed(Exception):
    """The step cannot succeed; the run fails with this message stored."""

    def __init__(self, message: str, *, code: str):
        super().__init__(message)
        self.code = code


class StepRetry(Exception):
    """A transient failure (a retryable provider error): the step is tried again later."""


def provider_for_run(run: AgentRun):
    """The model provider a run uses (a setting by default; run_start may name another)."""
    return providers.get_provider(run.provider_name or None)


def jsonable(value):
    return json.loads(json.dumps(value, default=str))


def call_model_for_node(*, ctx: NodeContext, schema, agent: str, extra_context: dict, instructions: str,
                        max_output_tokens: int, extra_source_refs: dict | None = None):
    """Build the context, call the provider, and buffer the ModelCall record (it commits with the
    step, failed or not). Returns (validated output, source refs)."""
    build_context = import_string(settings.ARBITER_CONTEXT_BUILDER)
    run = ctx.run
    used = run.tokens_used + ctx.buffer.tokens
    if used >= run.max_tokens:
        raise StepFailed(f"Token budget exhausted: {used} of {run.max_tokens} tokens used.", code="budget_exhausted")
    ctx.heartbeat()
    # A provider that knows its model's context window says how many tokens the prompt may take.
    budget = getattr(ctx.provider, "prompt_budget", None)
    built = build_context(run=run, agent=agent, state=ctx.state, case=ctx.case, instructions=instructions,
                          output_schema=schema, extra_context=extra_context, extra_source_refs=extra_source_refs,
                          prompt_tokens=budget(max_output_tokens) if budget else None)
    context = jsonable(built.context)
    record = {"run_id": run.pk, "sequence": ctx.sequence, "attempt": ctx.attempt, "agent": agent,
              "agent_version": ctx.node_def.version, "provider": getattr(ctx.provider, "name", ""),
              "model": getattr(ctx.provider, "model", ""), "output_schema": schema.__name__,
              "messages": built.messages, "context": context, "source_refs": jsonable(built.source_refs)}
    request = ModelRequest(agent=agent, output_schema=schema, messages=built.messages, context=context,
                           max_output_tokens=max_output_tokens)
    started = time.monotonic()
    try:
        response = ctx.provider.complete(request)
    except ModelOutputError as exc:

        record |= {"raw_output": exc.raw or "", "error": f"{exc}\n{exc.errors}".strip(),
                   "provider_attempts": exc.attempts, "prompt_tokens": count_message_tokens(built.messages),
                   "latency_ms": int((time.monotonic() - started) * 1000)}
        ctx.buffer.model_calls.append(record)
        raise StepFailed(f"The {agent} model's output was invalid after {exc.attempts} attempt(s): {exc.errors}",
                         code="model_output_invalid") from exc
    except ProviderError as exc:
        record |= {"error": f"{type(exc).__name__}: {exc}", "latency_ms": int((time.monotonic() - started) * 1000)}
        ctx.buffer.model_calls.append(record)
        if exc.retryable:
            raise StepRetry(f"The model provider failed ({exc}); the step will be retried.") from exc
        raise StepFailed(f"The model provider refused the request: {exc}", code="provider_error") from exc
    if not isinstance(response.output, schema):
        record |= {"raw_output": response.raw, "error": f"provider returned {type(response.output).__name__}"}
        ctx.buffer.model_calls.append(record)
        raise StepFailed(f"The {agent} model's output is not a {schema.__name__}.", code="model_output_invalid")
    record |= {"raw_output": response.raw, "validated_output": response.output.model_dump(mode="json"),
               "provider": response.provider, "model": response.model, "prompt_tokens": response.prompt_tokens,
               "completion_tokens": response.completion_tokens, "latency_ms": response.latency_ms,
               "provider_attempts": response.attempts}
    ctx.buffer.model_calls.append(record)
    ctx.buffer.tokens += response.prompt_tokens + response.completion_tokens
    metrics.model_tokens(agent=agent, prompt=response.prompt_tokens, completion=response.completion_tokens)
    ctx.heartbeat()
    return response.output, built.source_refs


