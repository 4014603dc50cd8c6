import hashlib
import json
from typing import Any

# One encoder, made once: json.dumps with these options builds a new JSONEncoder on every call,
# which costs more than encoding a small value. Same output as json.dumps(value, **these options).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: Any) -> str:
    """Deterministic JSON for hashing: sorted keys, no whitespace, str() for anything exotic."""
    return _CANONICAL.encode(value)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()
