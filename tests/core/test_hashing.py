"""core.hashing.canonical_json: one encoder made once, the same text as json.dumps with its options."""

import json
import random
from datetime import date
from decimal import Decimal

from core.hashing import canonical_json


def test_canonical_json_is_json_dumps_with_its_options():
    rng = random.Random(3)
    alphabet = "aé\u2028\"\\\n\x00𝄞 z"

    def value(depth=0):
        kind = rng.randrange(7 if depth < 3 else 4)
        if kind == 0:
            return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
        if kind == 1:
            return rng.choice([0, -1, 2**70, 1.5, -0.0, True, None])
        if kind == 2:
            return rng.choice([Decimal("1.10"), date(2026, 11, 26)])  # str() for anything exotic
        if kind == 3:
            return rng.random()
        if kind in (4, 5):
            return {"".join(rng.choice(alphabet) for _ in range(3)): value(depth + 1) for _ in range(rng.randrange(4))}
        return [value(depth + 1) for _ in range(rng.randrange(4))]

    for _ in range(2000):
        item = value()
        assert canonical_json(item) == json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                                  default=str)
