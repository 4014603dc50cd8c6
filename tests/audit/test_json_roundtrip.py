"""audit.services._json_roundtrip: what an event's JSON fields are hashed as. Its shortcut for plain
values (one pass that checks and copies) must give exactly what the JSON round trip gives, as a
copy that shares no container with its argument; anything not plain (floats, tuples, subclasses,
non-string keys, nesting deeper than the shortcut follows) takes the round trip itself."""

import json
import random
from collections import OrderedDict

from audit.services import _as_jsonb_number, _json_roundtrip


def _through_json(value):
    return json.loads(json.dumps(value, default=str), parse_float=_as_jsonb_number)


def _value(rng: random.Random, depth: int = 0, deepest: int = 4):
    kinds = ["str", "int", "bool", "null"] + (["dict", "list"] * 3 if depth < deepest else [])
    if rng.random() < 0.05:
        kinds += ["float", "tuple", "subclass", "int_key"]
    kind = rng.choice(kinds)
    if kind == "str":
        return rng.choice(["", "a", "日本語", '"\\', "x" * 30])
    if kind == "int":
        return rng.randint(-10**20, 10**20)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "float":
        return rng.choice([0.5, -0.0, 1e16])
    if kind == "tuple":
        return (1, "a")
    if kind == "subclass":
        return OrderedDict(a=1)
    if kind == "int_key":
        return {1: "a"}
    if kind == "dict":
        return {f"k{i}": _value(rng, depth + 1, deepest) for i in range(rng.randint(0, 4))}
    return [_value(rng, depth + 1, deepest) for _ in range(rng.randint(0, 4))]


def _containers(value):
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _containers(item)
    elif isinstance(value, list):
        yield value
        for item in value:
            yield from _containers(item)


def _nested(depth: int):
    value = {"leaf": 1}
    for level in range(depth):
        value = {"level": level, "inner": [value]} if level % 2 else {"inner": value}
    return value


def test_the_shortcut_gives_what_the_json_round_trip_gives_as_a_fresh_copy():
    rng = random.Random(20261127)
    for _ in range(3000):
        value = {f"p{i}": _value(rng, deepest=rng.choice([2, 4, 12])) for i in range(rng.randint(0, 6))}
        result = _json_roundtrip(value)
        expected = _through_json(value)
        assert result == expected
        assert json.dumps(result) == json.dumps(expected)  # the same types, the same key order
        originals = {id(container) for container in _containers(value)}
        assert not originals & {id(container) for container in _containers(result)}


def test_values_deeper_than_the_shortcut_follows_take_the_round_trip():
    for depth in range(6, 16):
        value = _nested(depth)
        assert _json_roundtrip(value) == _through_json(value)
    assert _json_roundtrip([(1, 2), {"a": -0.0}]) == [[1, 2], {"a": 0.0}]
    assert _json_roundtrip({"a": [{1: "b"}]}) == {"a": [{"1": "b"}]}
