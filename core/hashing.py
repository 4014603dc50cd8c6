import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Deterministic JSON for hashing: sorted keys, no whitespace, str() for anything exotic."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()
