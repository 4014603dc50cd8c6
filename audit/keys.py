"""The audit ledger's secret keys, read by the settings before Django starts (so: no Django here).

A key ring is written `kid:base64secret` entries, comma- or newline-separated, the first being the
key new events are signed with; the others only verify older events (rotation). It comes from the
ARBITER_AUDIT_KEYS environment variable or the file named by ARBITER_AUDIT_KEY_FILE (one entry a
line; blank lines and `#` comments allowed). The key never enters the database: whoever can write
the database cannot recompute a keyed chain hash.

`python -m audit.keys [KID]` prints a new entry (32 random bytes)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import sys
from pathlib import Path

MIN_KEY_BYTES = 32
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,40}")
# The key of DEBUG and of the test suite: derived from SECRET_KEY, named so that nobody mistakes it
# for a real one in an event's key_id.
DEVELOPMENT_KEY_ID = "development-only"
KEYGEN_HINT = ("create one with `python -m audit.keys` (or: python3 -c 'import base64, secrets; "
               "print(\"k1:\" + base64.b64encode(secrets.token_bytes(32)).decode())') and keep it outside "
               "the database")


class AuditKeyError(ValueError):
    pass


def parse_key_ring(text: str, *, source: str = "ARBITER_AUDIT_KEYS") -> dict[str, bytes]:
    """{kid: secret} in the order written (the first is the current key); {} for empty text."""
    ring: dict[str, bytes] = {}
    for raw in re.split(r"[,\n]", text):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        kid, separator, encoded = entry.partition(":")
        kid = kid.strip()
        if not separator or not KEY_ID_PATTERN.fullmatch(kid):
            raise AuditKeyError(f"{source}: each key is written KID:BASE64SECRET with a key id of letters, "
                                f"digits, '_', '.' or '-' (at most 40); got {kid[:40]!r}.")
        try:
            secret = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise AuditKeyError(f"{source}: the secret of key {kid!r} is not base64.") from None
        if len(secret) < MIN_KEY_BYTES:
            raise AuditKeyError(f"{source}: the secret of key {kid!r} has {len(secret)} bytes; "
                                f"use at least {MIN_KEY_BYTES} ({KEYGEN_HINT}).")
        if kid in ring:
            raise AuditKeyError(f"{source}: key id {kid!r} is given twice.")
        ring[kid] = secret
    return ring


def load_key_ring(keys: str, key_file: str) -> dict[str, bytes]:
    """The key ring from the environment's ARBITER_AUDIT_KEYS or ARBITER_AUDIT_KEY_FILE (not both)."""
    if keys.strip() and key_file:
        raise AuditKeyError("Set ARBITER_AUDIT_KEYS or ARBITER_AUDIT_KEY_FILE, not both.")
    if key_file:
        try:
            text = Path(key_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise AuditKeyError(f"ARBITER_AUDIT_KEY_FILE={key_file!r} cannot be read: {exc.strerror}.") from None
        ring = parse_key_ring(text, source=f"ARBITER_AUDIT_KEY_FILE={key_file!r}")
        if not ring:
            raise AuditKeyError(f"ARBITER_AUDIT_KEY_FILE={key_file!r} holds no key; {KEYGEN_HINT}.")
        return ring
    return parse_key_ring(keys)


def development_key_ring(secret_key: str) -> dict[str, bytes]:
    """DEBUG's and the tests' key: derived from SECRET_KEY, so every process of one setup agrees."""
    secret = hmac.digest(secret_key.encode("utf-8"), b"arbiter audit ledger development key", hashlib.sha256)
    return {DEVELOPMENT_KEY_ID: secret}


def key_ring_setting(ring: dict[str, bytes]) -> str:
    """`ring` written as ARBITER_AUDIT_KEYS takes it."""
    return ",".join(f"{kid}:{base64.b64encode(secret).decode()}" for kid, secret in ring.items())


def new_key_entry(kid: str = "k1") -> str:
    if not KEY_ID_PATTERN.fullmatch(kid):
        raise AuditKeyError(f"Key id {kid!r}: use letters, digits, '_', '.' or '-' (at most 40).")
    return f"{kid}:{base64.b64encode(secrets.token_bytes(MIN_KEY_BYTES)).decode()}"


if __name__ == "__main__":  # python -m audit.keys [KID]
    try:
        print(new_key_entry(*sys.argv[1:2]))
    except AuditKeyError as exc:
        sys.exit(str(exc))
