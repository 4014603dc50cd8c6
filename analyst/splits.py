"""The fixed evaluation split: every complaint goes to one side by a deterministic hash of its
Complaint ID, 60% train, 15% dev, 25% test (analyst.evaluation explains how each side is used).
A module of its own because the classifier (trained on one side) and the evaluation (which runs the
classifier) both need it."""

from __future__ import annotations

import hashlib

SPLITS = ("train", "dev", "test")
SPLIT_SALT = "arbiter-eval-v1"
# bucket (0-99) boundaries: [0, 60) train, [60, 75) dev, [75, 100) test
SPLIT_BOUNDS = (("train", 60), ("dev", 75), ("test", 100))


def split_of(complaint_id: str) -> str:
    """train / dev / test for a complaint id: a stable hash, independent of file order."""
    digest = hashlib.sha256(f"{SPLIT_SALT}:{str(complaint_id).strip()}".encode()).hexdigest()
    bucket = int(digest[:8], 16) % 100
    return next(name for name, bound in SPLIT_BOUNDS if bucket < bound)
