"""The agents: the model provider and its OpenAI-compatible settings, model contexts and redaction,
triage's confidence, the offline analyst's classifier, and conversations (threads, chat)."""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.env import env_int, env_str
from config.settings.base import VAR_DIR

ARBITER_MODEL_PROVIDER = env_str("ARBITER_MODEL_PROVIDER", "offline")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL", "")
OPENAI_API_KEY = env_str("OPENAI_API_KEY", "")
OPENAI_MODEL = env_str("OPENAI_MODEL", "")
OPENAI_TIMEOUT_SECONDS = env_int("OPENAI_TIMEOUT_SECONDS", 60, minimum=1)
# Output token limit of one model answer, and the reasoning effort sent to models that take one
# ("" = do not send the parameter; minimal, low, medium or high).
OPENAI_MAX_OUTPUT_TOKENS = env_int("OPENAI_MAX_OUTPUT_TOKENS", 1200, minimum=64)
OPENAI_REASONING_EFFORT = (env_str("OPENAI_REASONING_EFFORT", "") or "").strip().lower()
if OPENAI_REASONING_EFFORT not in ("", "minimal", "low", "medium", "high"):
    raise ImproperlyConfigured(f"OPENAI_REASONING_EFFORT={OPENAI_REASONING_EFFORT!r}: use minimal, low, medium, "
                               "high, or leave it empty to not send it.")
# How structured output is asked for: "json_schema" (OpenAI's structured outputs: OpenAI, vLLM, Ollama,
# LM Studio) or "json_object" (llama.cpp's llama-server and llama-cpp-python: {"type": "json_object",
# "schema": ...}, constrained by a grammar, with the token limit also sent as max_tokens).
OPENAI_RESPONSE_FORMAT = (env_str("OPENAI_RESPONSE_FORMAT", "json_schema") or "json_schema").strip().lower()
if OPENAI_RESPONSE_FORMAT not in ("json_schema", "json_object"):
    raise ImproperlyConfigured(f"OPENAI_RESPONSE_FORMAT={OPENAI_RESPONSE_FORMAT!r}: use json_schema, or json_object "
                               "for llama.cpp servers.")
# The model's context window in tokens (prompt and answer together; llama.cpp servers: their n_ctx,
# 4096 for `make llm`). 0 = large enough: nothing is cut. When set, the prompt is fitted into it
# (agents.context: long label lists left out of the schema text, then evidence cut, and said so).
OPENAI_CONTEXT_TOKENS = env_int("OPENAI_CONTEXT_TOKENS", 0, minimum=0)
# Token budget for evidence excerpts in one model context.
ARBITER_CONTEXT_EVIDENCE_TOKENS = env_int("ARBITER_CONTEXT_EVIDENCE_TOKENS", 6000, minimum=100)
# Dotted path of the function that redacts personal data from everything in model contexts
# (one redactor, core.redaction, for evidence, case fields, messages, memory ...).
ARBITER_CONTEXT_REDACTOR = env_str("ARBITER_CONTEXT_REDACTOR", "core.redaction.redact_personal_data")



def _fraction(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number; use a value between 0 and 1.") from None
    if not 0.0 <= value <= 1.0:
        raise ImproperlyConfigured(f"{name}={value} is outside 0..1.")
    return value


# Below this calibrated product confidence, triage says "needs an analyst", the adjudicator raises a
# dispute and notices leave product and issue out.
ARBITER_TRIAGE_MIN_CONFIDENCE = _fraction("ARBITER_TRIAGE_MIN_CONFIDENCE",
                                          env_str("ARBITER_TRIAGE_MIN_CONFIDENCE", "0.6"))
# Where the offline analyst's trained classifier is kept (`manage.py train_analyst` writes it;
# steps only load it). Default: <ARBITER_VAR_DIR>/analyst
ARBITER_ANALYST_DIR = Path(env_str("ARBITER_ANALYST_DIR", str(VAR_DIR / "analyst")))

# --- Conversations ---------------------------------------------------------------
# Token budget for the thread part of a chat context (summary + recent turns); a thread may
# override it. When a thread's context would exceed it, older turns are compacted into a summary.
CONVERSATIONS_CONTEXT_TOKEN_BUDGET = env_int("CONVERSATIONS_CONTEXT_TOKEN_BUDGET", 3000, minimum=200)
# The last N messages always enter a context verbatim (truncated per message if they must be).
CONVERSATIONS_KEEP_RECENT = env_int("CONVERSATIONS_KEEP_RECENT", 6, minimum=1)
# At most this many messages after the latest summary are read to build a context: the cost of a
# context never depends on the length of the thread.
CONVERSATIONS_CONTEXT_MAX_ROWS = env_int("CONVERSATIONS_CONTEXT_MAX_ROWS", 200, minimum=10)
# At most this many messages are folded into a summary by one compaction run.
CONVERSATIONS_COMPACTION_BATCH = env_int("CONVERSATIONS_COMPACTION_BATCH", 400, minimum=10)
# ... and at most this many tokens of them (each turn cut to a tenth of it) go to the summariser.
CONVERSATIONS_COMPACTION_INPUT_TOKENS = env_int("CONVERSATIONS_COMPACTION_INPUT_TOKENS", 6000, minimum=500)
CONVERSATIONS_MESSAGE_MAX_CHARS = env_int("CONVERSATIONS_MESSAGE_MAX_CHARS", 8000, minimum=100)
# The same chat message from the same person within this many seconds is a retry, not a new message.
ARBITER_CHAT_RETRY_WINDOW_SECONDS = env_int("ARBITER_CHAT_RETRY_WINDOW_SECONDS", 30, minimum=0)
