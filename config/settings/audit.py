"""The audit ledger: the keys its chain hashes are signed with, and the anchors of its stream heads."""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from audit.keys import KEYGEN_HINT, AuditKeyError, development_key_ring, load_key_ring
from config.env import env_int, env_str
from config.settings.base import DEBUG, SECRET_KEY, VAR_DIR

# --- Audit ledger keys and anchors (docs/adr/0017-i21-keyed-ledger.md) -------------------------
# Each event's chain hash is an HMAC under a secret kept outside the database: ARBITER_AUDIT_KEYS
# ("kid:base64secret,..." the first signs new events, the others verify older ones) or the file
# ARBITER_AUDIT_KEY_FILE. Required unless DEBUG=1, where a development key derived from
# SECRET_KEY (key id "development-only") is used. Signed anchors of every stream head are appended
# to ARBITER_AUDIT_ANCHOR_DIR/anchors.jsonl by beat every ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS.


def _audit_keys() -> dict:
    try:
        keys = load_key_ring(env_str("ARBITER_AUDIT_KEYS", ""), env_str("ARBITER_AUDIT_KEY_FILE", ""))
    except AuditKeyError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    if keys:
        return keys
    if not DEBUG:
        raise ImproperlyConfigured(f"ARBITER_AUDIT_KEYS (or ARBITER_AUDIT_KEY_FILE) is required unless DEBUG=1: "
                                   f"{KEYGEN_HINT}.")
    return development_key_ring(SECRET_KEY)


ARBITER_AUDIT_KEYS = _audit_keys()
ARBITER_AUDIT_KEY_ID = next(iter(ARBITER_AUDIT_KEYS))
ARBITER_AUDIT_ANCHOR_DIR = Path(env_str("ARBITER_AUDIT_ANCHOR_DIR", str(VAR_DIR / "anchors")))
ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS = env_int("ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS", 3600, minimum=60)
