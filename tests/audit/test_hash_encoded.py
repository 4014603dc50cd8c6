"""event_hash_encoded: the bulk writers' hash, over a body assembled around the payload's JSON text
encoded once, is event_hash's for the same event."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from audit.hashing import canonical_json, event_hash, event_hash_encoded

KEYS = {"k1": b"secret-one"}

CASES = [
    {"tenant_id": 3, "payload": {"b": 1, "a": [1, 2, {"z": None, "y": True}]}, "evidence_refs": [4, 5], "key_id": "k1"},
    {"tenant_id": None, "payload": {}, "evidence_refs": [], "key_id": ""},
    {"tenant_id": 12, "payload": {"text": "Prêt — \"quoted\" \\ back\nslash \u2028 émoji 🙂", "n": 1.5, "neg": -0.25},
     "evidence_refs": ["x"], "key_id": "k1"},
]


@pytest.mark.parametrize("fields", CASES)
def test_the_hash_over_the_encoded_payload_is_event_hashs(settings, fields):
    settings.ARBITER_AUDIT_KEYS = KEYS
    values = {"stream": "case:9", "sequence": 7, "actor_type": "system", "actor_id": "system:import — ü",
              "action": "cases.case.created", "target_type": "case", "target_id": "9", "run_id": "",
              "policy_version": "p-1", "decision": "", "prev_hash": "ab" * 32,
              "created_at": datetime(2026, 11, 27, 10, 1, 2, 345, tzinfo=UTC), **fields}
    encoded = event_hash_encoded(values, payload_json=canonical_json(values["payload"]),
                                 evidence_refs_json=canonical_json(values["evidence_refs"]))
    assert encoded == event_hash(SimpleNamespace(**values))


def test_a_different_payload_text_gives_a_different_hash(settings):
    settings.ARBITER_AUDIT_KEYS = KEYS
    values = {"tenant_id": 1, "stream": "tenant:1", "sequence": 1, "actor_type": "system", "actor_id": "a",
              "action": "x", "target_type": "", "target_id": "", "run_id": "", "policy_version": "", "decision": "",
              "prev_hash": "", "created_at": datetime(2026, 1, 1, tzinfo=UTC), "key_id": "k1",
              "payload": {"n": 1}, "evidence_refs": []}
    honest = event_hash_encoded(values, payload_json='{"n":1}', evidence_refs_json="[]")
    assert honest == event_hash(SimpleNamespace(**values))
    assert event_hash_encoded(values, payload_json='{"n":2}', evidence_refs_json="[]") != honest
