import hashlib
import json

HASHED_FIELDS = (
    "tenant_id", "stream", "sequence", "actor_type", "actor_id", "action", "target_type", "target_id",
    "run_id", "policy_version", "decision", "evidence_refs", "payload", "prev_hash",
)


def event_hash(event) -> str:
    """sha256 over the event's fields and the previous event's hash: changing any stored field,
    or removing/reordering an event, breaks the chain from that event on."""
    body = {name: getattr(event, name) for name in HASHED_FIELDS}
    body["created_at"] = event.created_at.isoformat(timespec="microseconds")
    raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()
