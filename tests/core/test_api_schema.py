"""The schema states the rules the server enforces (core.api_schema, ADR 0028), and the server
answers what the schema says: a method an operation lacks is 405 before its parameters are judged;
an If-Match that is not entity tags matches nothing (412)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from core.paging import CURSOR_PATTERN
from tests.api.conftest import assert_error

UNSAFE = ("post", "put", "patch", "delete")


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("schema") / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(path))
    return json.loads(path.read_text())


def _parameter(operation: dict, name: str) -> dict | None:
    return next((p for p in operation.get("parameters", []) if p["name"] == name), None)


def test_every_write_states_the_header_rules_and_its_412(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method not in UNSAFE:
                continue
            key, if_match = _parameter(operation, "Idempotency-Key"), _parameter(operation, "If-Match")
            assert key["schema"]["maxLength"] == 200 and key["schema"]["pattern"], (method, path)
            assert re.match(if_match["schema"]["pattern"], '"case-12-v3", W/"x"'), (method, path)
            assert not re.match(if_match["schema"]["pattern"], "case-12-v3"), (method, path)
            assert "412" in operation["responses"], (method, path)


def test_every_list_states_its_cursor_grammar_bounds_and_410(schema):
    lists = 0
    for path, operations in schema["paths"].items():
        operation = operations.get("get", {})
        cursor = _parameter(operation, "cursor")
        if cursor is None:
            continue
        lists += 1
        assert cursor["schema"]["pattern"] == CURSOR_PATTERN, path
        assert _parameter(operation, "page_size")["schema"]["minimum"] == 1, path
        assert "410" in operation["responses"], path
        for parameter in operation["parameters"]:
            if parameter["schema"].get("type") == "integer":
                assert "minimum" in parameter["schema"] and "maximum" in parameter["schema"], (path, parameter)
    assert lists >= 10
    feed = schema["paths"]["/api/v1/events/"]["get"]
    assert _parameter(feed, "limit")["schema"] | {"minimum": 1, "maximum": 500} == _parameter(feed, "limit")["schema"]


@pytest.mark.django_db
def test_a_method_the_operation_lacks_is_405_whatever_its_parameters(analyst):
    client = APIClient()
    client.force_authenticate(analyst)
    response = client.generic("TRACE", "/api/v1/cases/?cursor=0&nope=1", HTTP_IDEMPOTENCY_KEY="")
    assert_error(response, 405, "method_not_allowed")


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["0", "", 'W/"x', "case-1-v1"])
def test_an_if_match_that_is_not_entity_tags_matches_nothing(analyst, case, header):
    client = APIClient()
    client.force_authenticate(analyst)
    response = client.post(f"/api/v1/cases/{case.reference}/evidence/", {"title": "A", "text": "B"}, format="json",
                           HTTP_IF_MATCH=header)
    assert_error(response, 412, "precondition_failed")
