"""Provider "openai" (alias "openai-compatible"): any server speaking the OpenAI chat-completions
protocol — the hosted API or a local server (vLLM, llama.cpp, Ollama, LM Studio ...).

What it does on `complete(request)`:
  1. POST /chat/completions with the request's messages, passed through unchanged (the context
     builder has already wrapped evidence and user text as delimited untrusted data, and the
     ModelCall row records exactly these messages), and a structured-outputs response_format
     built from `request.output_schema` — strict when the schema allows it (see
     `response_format_for`). OPENAI_RESPONSE_FORMAT=json_object sends the llama.cpp variant
     instead — {"type": "json_object", "schema": ...}, which llama.cpp's llama-server and
     llama-cpp-python's server turn into a grammar — and the answer's token limit as `max_tokens`
     too (those servers ignore `max_completion_tokens`).
  2. Parse and validate the answer with `output_schema.model_validate_json`. If it is not JSON or
     breaks the schema, ask ONCE more, appending the model's answer and a user message carrying
     the validation errors; a second failure raises ModelOutputError(raw, errors, attempts=2).
  3. Transport trouble raises ProviderError: timeouts, connection errors, 408/409/429 and 5xx are
     retryable; other 4xx (bad request, authentication, unknown model) are not. The SDK's own
     retries are off (max_retries=0): whether and when to retry a step is the executor's
     decision, made with its budgets and leases in view.
  4. OPENAI_CONTEXT_TOKENS (the server's context window, e.g. llama.cpp's n_ctx) makes
     `prompt_budget` say how many tokens a prompt may take beside the answer; the context builder
     fits the prompt into it (agents.context). The retry's correction is shortened to fit too.
Token counts come from the response's `usage`, summed over both attempts, or are counted
offline (core.tokens) when a server omits them.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ValidationError

from core.tokens import count_message_tokens, count_tokens, truncate_to_tokens
from runs.providers import ModelOutputError, ModelRequest, ModelResponse, ProviderError

# Local servers usually ignore the key, but the SDK insists on one; this placeholder is sent when
# OPENAI_API_KEY is empty. A hosted API answers it with 401, reported as "set OPENAI_API_KEY".
PLACEHOLDER_API_KEY = "no-key-configured"
RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_ERROR_TEXT = 4000
# A prompt is measured offline (core.tokens), not with the server's tokenizer: the budget keeps
# this share of the room free for the difference, and a few tokens for the chat template's turns.
# Measured on Gemma 3 270M behind llama-cpp-python (ADR 0033): see TOKENIZER_SLACK's use.
TOKENIZER_SLACK = 0.10
CHAT_TEMPLATE_TOKENS = 32
# Kept free of the first prompt for the retry's correction (the first answer and its errors, shortened).
RETRY_RESERVE = 160


def _is_strict_compatible(node: Any) -> bool:
    """Strict structured outputs need every object closed (additionalProperties: false).
    A free-form dict (e.g. ChatIntent.payload) cannot be, so such a schema is sent non-strict."""
    if isinstance(node, dict):
        if node.get("type") == "object" and node.get("additionalProperties", False) is not False:
            return False
        return all(_is_strict_compatible(value) for value in node.values())
    if isinstance(node, list):
        return all(_is_strict_compatible(value) for value in node)
    return True


RESPONSE_FORMATS = ("json_schema", "json_object")
# llama.cpp builds its grammar by spelling out bounded repetitions: "maxLength": 20000 becomes a
# rule nested 20,000 deep and the server crashes (stack overflow). The json_object variant leaves
# such bounds out of the grammar; the schema's validation still enforces them on the answer. A small
# bound is kept (GRAMMAR_SMALL_BOUND): without "minLength": 1 Gemma 3 270M answered a consumer
# request with an empty statement, which the schema refuses.
GRAMMAR_UNSAFE_KEYS = frozenset({"maxLength", "minLength", "maxItems", "minItems"})
GRAMMAR_SMALL_BOUND = 8


# Nor does its grammar check a number's bounds: Gemma 3 270M answered a confidence of 500 and the
# answer failed validation twice. A number bounded to [0, 1] (the schemas' confidences) is sent as
# one of 21 values, 0, 0.05, …, 1, which the grammar can hold the model to.
UNIT_INTERVAL_STEPS = [round(step / 20, 2) for step in range(21)]


def _for_grammar(node: Any) -> Any:
    """The schema as llama.cpp's grammar builder can take it: no large length bounds, and numbers bounded
    to [0, 1] as an enum of steps. The answer is still validated against the full schema."""
    if isinstance(node, dict):
        node = {key: _for_grammar(value) for key, value in node.items()
                if key not in GRAMMAR_UNSAFE_KEYS or (isinstance(value, int) and value <= GRAMMAR_SMALL_BOUND)}
        if node.get("type") == "number" and node.get("minimum") == 0 and node.get("maximum") == 1:
            node = {key: value for key, value in node.items() if key not in ("type", "minimum", "maximum")}
            node["enum"] = UNIT_INTERVAL_STEPS
        return node
    if isinstance(node, list):
        return [_for_grammar(value) for value in node]
    return node


def response_format_for(schema: type[BaseModel], variant: str = "json_schema") -> dict:
    """The json_schema response_format for `schema`: the SDK's strict transformation (the one
    `client.chat.completions.parse` uses: all properties required, objects closed, $refs with
    siblings inlined) when the schema can be strict, else pydantic's schema with strict off."""
    from openai.lib._pydantic import to_strict_json_schema  # the SDK's helper, pinned version

    strict_schema = to_strict_json_schema(schema)
    strict = _is_strict_compatible(strict_schema)
    if variant == "json_object":
        return {"type": "json_object",
                "schema": _for_grammar(strict_schema if strict else schema.model_json_schema())}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema.__name__,
            "schema": strict_schema if strict else schema.model_json_schema(),
            "strict": strict,
        },
    }


_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def json_text(raw: str) -> str:
    """The JSON in a model's answer. Servers without structured outputs often wrap it in a
    ```json fence; the fence is dropped (the raw answer is still what gets recorded)."""
    match = _FENCE.match(raw or "")
    return match.group("body") if match else raw


def without_nul(raw: str) -> str:
    """A model's answer without NUL characters. A small model can write one; PostgreSQL refuses
    U+0000 in text and jsonb, so a step that stored it could not commit, nor could the record of its
    failure. It carries nothing a person reads, so it is dropped where the answer is read."""
    return raw.replace("\x00", "")


def _scrubbed(value):
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    if isinstance(value, dict):
        return {_scrubbed(key): _scrubbed(item) for key, item in value.items()}
    return value


def validated(schema: type[BaseModel], raw: str) -> BaseModel:
    """The answer parsed and validated against `schema`. JSON with a raw line break or tab inside a
    string (llama.cpp's grammar lets Gemma 3 270M write one) is read as JSON's lenient mode reads
    it; anything else that is not JSON, or does not fit the schema, raises ValidationError. A NUL
    written as JSON's escape (\\u0000) is dropped from the parsed text, as `without_nul` drops a raw one."""
    text = json_text(raw)
    try:
        output = schema.model_validate_json(text)
    except ValidationError as error:
        if not any(item.get("type") == "json_invalid" and "control character" in str(item.get("msg"))
                   for item in error.errors()):
            raise
        try:
            data = json.loads(text, strict=False)
        except ValueError:
            raise error from None
        output = schema.model_validate(data)
    if "\\u0000" in text.lower():
        output = schema.model_validate(_scrubbed(output.model_dump(mode="json")))
    return output


def retry_message(schema: type[BaseModel], errors: str) -> dict[str, str]:
    return {
        "role": "user",
        "content": (
            f"Your previous answer is not valid for the {schema.__name__} JSON schema. Validation errors:\n"
            f"{errors[:MAX_ERROR_TEXT]}\n"
            "Answer again with a single JSON object that satisfies the schema, and nothing else."
        ),
    }


class OpenAICompatibleProvider:
    name = "openai"

    def __init__(self, *, base_url: str, model: str, api_key: str = "", timeout: float = 60.0,
                 max_retries: int = 0, max_output_tokens: int | None = None, reasoning_effort: str = "",
                 response_format: str = "json_schema", context_tokens: int = 0):
        if response_format not in RESPONSE_FORMATS:
            raise ImproperlyConfigured(f"OPENAI_RESPONSE_FORMAT={response_format!r}: use json_schema (OpenAI, vLLM, "
                                       "Ollama, LM Studio) or json_object (llama.cpp servers).")
        self.model = model
        self.response_format = response_format
        self.base_url = base_url
        self.timeout = timeout
        # OPENAI_MAX_OUTPUT_TOKENS caps every answer (a node may ask for less); OPENAI_REASONING_EFFORT is
        # sent only when set (servers and models without the parameter would refuse it).
        self.max_output_tokens = max_output_tokens
        self.context_tokens = int(context_tokens or 0)
        self.reasoning_effort = (reasoning_effort or "").strip().lower()
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or PLACEHOLDER_API_KEY,
                                     timeout=timeout, max_retries=max_retries)

    @classmethod
    def from_settings(cls) -> OpenAICompatibleProvider:
        """The provider OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL, OPENAI_TIMEOUT_SECONDS,
        OPENAI_MAX_OUTPUT_TOKENS and OPENAI_REASONING_EFFORT describe; says what to set if one is missing."""
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
        return cls(base_url=base_url, api_key=getattr(settings, "OPENAI_API_KEY", "") or "",
                   model=model, timeout=float(getattr(settings, "OPENAI_TIMEOUT_SECONDS", 60)),
                   max_output_tokens=getattr(settings, "OPENAI_MAX_OUTPUT_TOKENS", None),
                   reasoning_effort=getattr(settings, "OPENAI_REASONING_EFFORT", "") or "",
                   response_format=getattr(settings, "OPENAI_RESPONSE_FORMAT", "") or "json_schema",
                   context_tokens=getattr(settings, "OPENAI_CONTEXT_TOKENS", 0) or 0)

    # --- sizes -------------------------------------------------------------------------------
    def answer_limit(self, requested: int) -> int:
        """The token limit sent for one answer: the node's, capped by OPENAI_MAX_OUTPUT_TOKENS."""
        return min(requested, self.max_output_tokens) if self.max_output_tokens else requested

    def _room(self, max_output_tokens: int) -> int | None:
        """Tokens (counted offline, core.tokens) the messages may take beside an answer of
        `max_output_tokens` in the model's context window; None when the window is not set."""
        if not self.context_tokens:
            return None
        room = self.context_tokens - self.answer_limit(max_output_tokens) - CHAT_TEMPLATE_TOKENS
        return max(int(room * (1 - TOKENIZER_SLACK)), 0)

    def prompt_budget(self, max_output_tokens: int) -> int | None:
        """The tokens a prompt may take: the room, less RETRY_RESERVE for the retry's correction."""
        room = self._room(max_output_tokens)
        return None if room is None else max(room - RETRY_RESERVE, 0)

    def _retry(self, messages: list[dict], raw: str, schema: type[BaseModel], errors: str,
               limit: int) -> list[dict]:
        """The second try's messages: the first answer and its validation errors. With a context
        window set, the answer and then the errors are shortened so the whole still fits."""
        room = self._room(limit)
        correction = [{"role": "assistant", "content": raw}, retry_message(schema, errors)]
        if room is None or count_message_tokens(messages + correction) <= room:
            return messages + correction
        left = room - count_message_tokens(messages + [{"role": "assistant", "content": ""},
                                                       retry_message(schema, "")])
        answer = truncate_to_tokens(raw, max(left, 0) // 2)
        errors = truncate_to_tokens(errors, max(left - count_tokens(answer), 0))
        return messages + [{"role": "assistant", "content": answer}, retry_message(schema, errors)]

    # --- transport ---------------------------------------------------------------------------
    def _create(self, messages: list[dict[str, str]], response_format: dict, max_tokens: int):
        extra: dict[str, Any] = {"reasoning_effort": self.reasoning_effort} if self.reasoning_effort else {}
        if self.response_format == "json_object":
            extra["max_tokens"] = max_tokens
        try:
            return self._client.chat.completions.create(
                model=self.model, messages=messages, response_format=response_format,
                max_completion_tokens=max_tokens, **extra)
        except openai.APITimeoutError as error:
            raise ProviderError(f"The model server at {self.base_url} did not answer within {self.timeout:g}s.",
                                retryable=True) from error
        except openai.APIConnectionError as error:
            raise ProviderError(f"Could not connect to the model server at {self.base_url}: {error}. "
                                "Check OPENAI_BASE_URL and that the server is running.", retryable=True) from error
        except openai.APIStatusError as error:
            status = error.status_code
            retryable = status in RETRYABLE_STATUS or status >= 500
            hint = {401: " Set OPENAI_API_KEY to a valid key.",
                    403: " The key may not be allowed to use this model.",
                    404: f" Check OPENAI_MODEL ({self.model!r}) and OPENAI_BASE_URL.",
                    429: " Rate limited: retry later."}.get(status, "")
            detail = str(getattr(error, "message", "") or error)[:500]
            raise ProviderError(f"The model server answered HTTP {status}: {detail}.{hint}", retryable=retryable,
                                status_code=status) from error
        except openai.OpenAIError as error:
            raise ProviderError(f"The model server's answer could not be read: {error}", retryable=False) from error

    # --- the contract ------------------------------------------------------------------------
    def complete(self, request: ModelRequest) -> ModelResponse:
        schema = request.output_schema
        response_format = response_format_for(schema, self.response_format)
        messages = [dict(message) for message in request.messages]
        prompt_tokens = completion_tokens = 0
        started = time.perf_counter()
        raw, errors = "", ""
        for attempt in (1, 2):
            limit = self.answer_limit(request.max_output_tokens)
            completion = self._create(messages, response_format, limit)
            choice = completion.choices[0] if completion.choices else None
            message = choice.message if choice else None
            raw = without_nul((message.content if message and message.content is not None
                               else (getattr(message, "refusal", None) or "")) if message else "")
            usage = completion.usage
            prompt_tokens += usage.prompt_tokens if usage else count_message_tokens(messages)
            completion_tokens += usage.completion_tokens if usage else count_tokens(raw)
            try:
                output = validated(schema, raw)
            except ValidationError as error:
                errors = str(error)
                if attempt == 1:
                    messages = self._retry(messages, raw, schema, errors, request.max_output_tokens)
                continue
            return ModelResponse(output=output, raw=raw, provider=self.name, model=completion.model or self.model,
                                 prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                 latency_ms=int(round((time.perf_counter() - started) * 1000)), attempts=attempt)
        raise ModelOutputError(
            f"The model's answer failed the {schema.__name__} schema twice (the second try was told the errors).",
            raw=raw, errors=errors, attempts=2)
