"""The openai-compatible provider's llama.cpp variant of structured output
(OPENAI_RESPONSE_FORMAT=json_object), against the local fake OpenAI server."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic import ValidationError

from agents.providers import OpenAICompatibleProvider, response_format_for, validated
from agents.schemas import NoticeDraftOutput, TriageOutput
from runs.providers import ModelRequest
from tests.fakes.fixtures import fake_openai  # noqa: F401


def _keys(node) -> set[str]:
    if isinstance(node, dict):
        return set(node) | set().union(*(_keys(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_keys(value) for value in node)) if node else set()
    return set()


def _bounds(node) -> list[int]:
    """Every length or count bound in a schema."""
    if isinstance(node, dict):
        own = [value for key, value in node.items() if key in ("maxLength", "minLength", "maxItems", "minItems")]
        return own + [bound for value in node.values() for bound in _bounds(value)]
    if isinstance(node, list):
        return [bound for value in node for bound in _bounds(value)]
    return []


def test_the_llama_cpp_variant_carries_the_schema_without_length_bounds():
    standard = response_format_for(TriageOutput)
    variant = response_format_for(TriageOutput, "json_object")
    assert variant["type"] == "json_object" and "json_schema" not in variant
    schema = variant["schema"]
    # The same shape and enums as the standard schema ...
    assert schema["required"] == standard["json_schema"]["schema"]["required"]
    product = standard["json_schema"]["schema"]["properties"]["product"]
    assert product["enum"] and schema["properties"]["product"]["enum"] == product["enum"]
    # ... without the long bounded repetitions llama.cpp's grammar builder cannot take; a small bound
    # (a required statement's "minLength": 1) stays, so the grammar holds the model to it.
    assert "maxLength" in _keys(standard) and not _keys(variant) & {"maxLength", "maxItems"}
    assert _bounds(variant) and all(value <= 8 for value in _bounds(variant))
    request = variant["schema"]["$defs"]["ConsumerRequest"]["properties"]["statement"]
    assert request["minLength"] == 1 and "maxLength" not in request


def test_the_llama_cpp_variant_holds_unit_interval_numbers_to_steps():
    """llama.cpp's grammar checks no numeric bound (a real model answered a confidence of 500): a
    number bounded to [0, 1] is sent as an enum of steps; the standard variant keeps its bounds."""
    standard = response_format_for(TriageOutput)["json_schema"]["schema"]["properties"]["confidence"]
    variant = response_format_for(TriageOutput, "json_object")["schema"]["properties"]["confidence"]
    assert (standard["minimum"], standard["maximum"]) == (0, 1)
    assert "minimum" not in variant and "maximum" not in variant
    assert variant["enum"][0] == 0 and variant["enum"][-1] == 1 and len(variant["enum"]) == 21
    assert all(TriageOutput.model_fields["confidence"].metadata and 0 <= v <= 1 for v in variant["enum"])


def test_the_provider_sends_the_variant_and_max_tokens(fake_openai):  # noqa: F811
    provider = OpenAICompatibleProvider(base_url=fake_openai.base_url, model="gemma", timeout=2,
                                        max_output_tokens=300, response_format="json_object")
    fake_openai.reply_json({"subject": "Your complaint", "body": "We received your complaint."})
    request = ModelRequest(agent="notice_drafter", output_schema=NoticeDraftOutput, max_output_tokens=500,
                           messages=[{"role": "system", "content": "Draft."}, {"role": "user", "content": "Case."}],
                           context={})

    response = provider.complete(request)

    assert response.output.subject == "Your complaint"
    body = fake_openai.requests[0].body
    assert body["response_format"]["type"] == "json_object"
    assert body["response_format"]["schema"]["required"] == ["subject", "body"]
    assert body["max_tokens"] == 300 and body["max_completion_tokens"] == 300


def test_the_standard_format_sends_no_max_tokens(fake_openai):  # noqa: F811
    provider = OpenAICompatibleProvider(base_url=fake_openai.base_url, model="gpt", timeout=2)
    fake_openai.reply_json({"subject": "S", "body": "B"})
    provider.complete(ModelRequest(agent="notice_drafter", output_schema=NoticeDraftOutput, max_output_tokens=50,
                                   messages=[{"role": "user", "content": "Case."}], context={}))
    body = fake_openai.requests[0].body
    assert body["response_format"]["type"] == "json_schema" and "max_tokens" not in body


def test_an_unknown_response_format_is_refused_with_what_to_set(settings):
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = "http://127.0.0.1:9/v1", "m"
    settings.OPENAI_RESPONSE_FORMAT = "grammar"
    with pytest.raises(ImproperlyConfigured, match="OPENAI_RESPONSE_FORMAT"):
        OpenAICompatibleProvider.from_settings()
    settings.OPENAI_RESPONSE_FORMAT = "json_object"
    assert OpenAICompatibleProvider.from_settings().response_format == "json_object"
    assert json.dumps(response_format_for(NoticeDraftOutput, "json_object"))


def test_a_raw_line_break_inside_a_string_is_read_and_broken_json_is_still_refused():
    """Gemma 3 270M behind llama.cpp wrote a line break inside a JSON string; JSON's lenient mode
    reads it. Text that is not JSON, or JSON that does not fit the schema, is still refused."""
    raw = '{"subject": "Your complaint", "body": "Dear consumer,\nwe received it."}'
    assert "\n" in raw  # a real line break inside the string, as the model wrote it
    assert validated(NoticeDraftOutput, raw).body == "Dear consumer,\nwe received it."
    with pytest.raises(ValidationError):
        validated(NoticeDraftOutput, '{"subject": "x", "body": ')
    with pytest.raises(ValidationError):
        validated(NoticeDraftOutput, '{"subject": "line\nbreak"}')  # read, then refused: no body
