import hashlib
import hmac
import json

from django.conf import settings

HASHED_FIELDS = (
    "tenant_id", "stream", "sequence", "actor_type", "actor_id", "action", "target_type", "target_id",
    "run_id", "policy_version", "decision", "evidence_refs", "payload", "prev_hash",
)
# The keyed event each stream got when the ledger switched to keyed hashes (audit.cutover, ADR 0017).
CUT_OVER_ACTION = "audit.ledger.keyed"


class UnknownAuditKey(LookupError):
    pass


def event_hash(event, keys: dict[str, bytes] | None = None) -> str:
    """The chain hash of `event`: over its fields and the previous event's hash, so changing any
    stored field, or removing/reordering an event, breaks the chain from that event on.

    Keyed (HMAC-SHA-256 with the secret of the event's `key_id`, from the settings' key ring
    unless `keys` is given): nobody without the key, a database administrator included, can
    recompute it. Events written before the ledger was keyed have no key_id and keep their plain
    SHA-256 (they verify only as the unkeyed start of a stream sealed by its cut-over event)."""
    body = {name: getattr(event, name) for name in HASHED_FIELDS}
    body["created_at"] = event.created_at.isoformat(timespec="microseconds")
    raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    digest = chain_digest(raw.encode("utf-8"), getattr(event, "key_id", ""), keys)
    if digest is None:
        raise UnknownAuditKey(f"No audit key {event.key_id!r} in ARBITER_AUDIT_KEYS.")
    return digest


def chain_digest(body: bytes, key_id: str, keys: dict[str, bytes] | None = None) -> str | None:
    """The hex digest of an event's canonical body: HMAC-SHA-256 under `key_id`'s secret, plain
    SHA-256 for an unkeyed event (key_id ""), None for a key id the ring does not hold."""
    if not key_id:
        return hashlib.sha256(body).hexdigest()
    secret = (settings.ARBITER_AUDIT_KEYS if keys is None else keys).get(key_id)
    if secret is None:
        return None
    return hmac.digest(secret, body, "sha256").hex()


def current_key_id() -> str:
    return settings.ARBITER_AUDIT_KEY_ID
