"""The switch of an existing ledger to keyed chain hashes (ADR 0017).

Events written before it keep their plain SHA-256 hashes and verify as before. Each stream whose
last event is unkeyed gets one keyed event, `audit.ledger.keyed`, appended by the migration that
introduced the keys: its HMAC covers the hash of the last unkeyed event (its prev_hash), so the
unkeyed start of the stream can no longer be rewritten without the key either. From there on
every event of the stream is keyed, and audit_verify refuses an unkeyed event after a keyed one,
a keyed run of events that does not start with the cut-over, and unkeyed events that no cut-over
seals (a stream rewritten as if it had never been keyed)."""

from __future__ import annotations

from types import SimpleNamespace

from django.conf import settings
from django.utils import timezone

from audit.hashing import CUT_OVER_ACTION, event_hash

CUT_OVER_ACTOR = "system:audit-keys"
_BATCH = 1000


def ledger_cut_over(event_model, head_model, *, keys: dict[str, bytes] | None = None,
                    key_id: str | None = None) -> int:
    """Append the keyed cut-over event to every stream whose last event is unkeyed; returns how many
    streams were cut over. Running it again does nothing (every stream then ends keyed). Takes the
    models so that the migration can pass its historical ones; call it inside a transaction."""
    keys = settings.ARBITER_AUDIT_KEYS if keys is None else keys
    key_id = settings.ARBITER_AUDIT_KEY_ID if key_id is None else key_id
    heads = list(head_model.objects.select_for_update().filter(last_sequence__gt=0).order_by("stream")
                 .values_list("id", "stream", "last_sequence", "last_hash"))
    done = 0
    for start in range(0, len(heads), _BATCH):
        batch = heads[start:start + _BATCH]
        unkeyed = _unkeyed_heads(event_model, batch)
        events = []
        now = timezone.now()
        for head_id, stream, last_sequence, last_hash in batch:
            if (stream, last_sequence) not in unkeyed:
                continue
            values = {
                "tenant_id": unkeyed[(stream, last_sequence)], "stream": stream, "sequence": last_sequence + 1,
                "actor_type": "system", "actor_id": CUT_OVER_ACTOR, "action": CUT_OVER_ACTION,
                "target_type": "", "target_id": "", "run_id": "", "policy_version": "", "decision": "",
                "evidence_refs": [], "payload": {"unkeyed_through_sequence": last_sequence, "key_id": key_id},
                "created_at": now, "prev_hash": last_hash, "key_id": key_id,
            }
            values["hash"] = event_hash(SimpleNamespace(**values), keys)
            events.append((head_id, event_model(**values)))
        event_model.objects.bulk_create([event for _, event in events])
        for head_id, event in events:
            head_model.objects.filter(id=head_id).update(last_sequence=event.sequence, last_hash=event.hash)
        done += len(events)
    return done


def _unkeyed_heads(event_model, heads) -> dict[tuple[str, int], int | None]:
    """(stream, sequence) -> tenant_id of those of `heads`' last events that are unkeyed."""
    found: dict[tuple[str, int], int | None] = {}
    streams = {stream: last_sequence for _, stream, last_sequence, _ in heads}
    # Narrowed by the head sequences too, so this reads about one event per stream, not the ledger.
    rows = (event_model.objects.filter(stream__in=list(streams), sequence__in=set(streams.values()), key_id="")
            .values_list("stream", "sequence", "tenant_id"))
    for stream, sequence, tenant_id in rows.iterator():
        if streams[stream] == sequence:
            found[(stream, sequence)] = tenant_id
    return found
