import hashlib
import hmac
import json
from json.encoder import encode_basestring

from django.conf import settings

HASHED_FIELDS = (
    "tenant_id", "stream", "sequence", "actor_type", "actor_id", "action", "target_type", "target_id",
    "run_id", "policy_version", "decision", "evidence_refs", "payload", "prev_hash",
)
# The keyed event each stream got when the ledger switched to keyed hashes (audit.cutover, ADR 0017).
CUT_OVER_ACTION = "audit.ledger.keyed"


# The canonical encoder of an event's body: sorted keys, no spaces, str() for anything exotic (what
# json.dumps with these options writes), made once — json.dumps with options builds an encoder on
# every call, which costs more than encoding a small body.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


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
    raw = _CANONICAL.encode(body)
    digest = chain_digest(raw.encode("utf-8"), getattr(event, "key_id", ""), keys)
    if digest is None:
        raise UnknownAuditKey(f"No audit key {event.key_id!r} in ARBITER_AUDIT_KEYS.")
    return digest


# HASHED_FIELDS and created_at in the order sort_keys writes them.
_BODY_KEYS = tuple((name, encode_basestring(name) + ":") for name in sorted((*HASHED_FIELDS, "created_at")))


def _encode_scalar(value) -> str:
    """canonical_json(value), without the encoder's call for the common exact types."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return _CANONICAL.encode(value)


def canonical_json(value) -> str:
    """`value` encoded as event_hash encodes it inside an event's body (sorted keys, no spaces)."""
    return _CANONICAL.encode(value)


def event_hash_encoded(values: dict, *, payload_json: str, evidence_refs_json: str) -> str:
    """event_hash of the event whose fields are `values` (attname -> value, as audit_event_values
    gives them), with its payload and evidence refs already encoded by canonical_json: the body is
    assembled around those two texts instead of encoding them again, the same bytes json.dumps
    writes for the whole body, so the same hash. For bulk writers that also send `payload_json` to
    the database as it is (one encoding per payload)."""
    parts = []
    for name, prefix in _BODY_KEYS:
        if name == "payload":
            encoded = payload_json
        elif name == "evidence_refs":
            encoded = evidence_refs_json
        elif name == "created_at":
            encoded = encode_basestring(values["created_at"].isoformat(timespec="microseconds"))
        else:
            encoded = _encode_scalar(values[name])
        parts.append(prefix + encoded)
    raw = "{" + ",".join(parts) + "}"
    digest = chain_digest(raw.encode("utf-8"), values.get("key_id", ""))
    if digest is None:
        raise UnknownAuditKey(f"No audit key {values['key_id']!r} in ARBITER_AUDIT_KEYS.")
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
