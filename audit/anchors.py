"""Signed anchors of every stream head, written OUTSIDE the database (ADR 0017).

An anchor is one line of ARBITER_AUDIT_ANCHOR_DIR/anchors.jsonl: when it was taken, the key id,
every stream's (sequence, hash) head, and an HMAC-SHA-256 over all of it with that audit key.
Whoever can write the database cannot move an anchor: audit_verify checks that the event each
anchor names is still there with that hash, so removing events from the end of a stream, or a
whole stream, is found even where the stream head was rewritten to match. Written by beat
(audit.tasks.audit_anchor_task) and `manage.py audit_anchor`; the file only grows."""

from __future__ import annotations

import fcntl
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.hashing import canonical_json

ANCHOR_FILE = "anchors.jsonl"


class AnchorError(Exception):
    """The latest anchor cannot be trusted: unreadable, not signed with a key of the ring, or its
    signature does not match (the file was edited)."""


@dataclass(frozen=True)
class Anchor:
    anchored_at: str
    key_id: str
    heads: dict[str, tuple[int, str]]


def anchor_path() -> Path:
    return Path(settings.ARBITER_AUDIT_ANCHOR_DIR) / ANCHOR_FILE


def _signature(body: dict, secret: bytes) -> str:
    return hmac.digest(secret, canonical_json(body).encode("utf-8"), "sha256").hex()


def anchor_write() -> Anchor:
    """Append a signed anchor of every stream head to the anchor file (created if missing) and
    flush it to disk. Each head read is committed, so an anchor never names an event that a
    rolled-back transaction wrote."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT stream, last_sequence, last_hash FROM audit_auditstreamhead "
                       "WHERE last_sequence > 0 ORDER BY stream")
        heads = cursor.fetchall()
    key_id = settings.ARBITER_AUDIT_KEY_ID
    body = {"anchored_at": timezone.now().isoformat(timespec="microseconds"), "key_id": key_id,
            "heads": [[stream, sequence, digest] for stream, sequence, digest in heads]}
    body["signature"] = _signature(body, settings.ARBITER_AUDIT_KEYS[key_id])
    path = anchor_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        # Two writers (beat and a manual run) each append a whole line.
        fcntl.flock(file, fcntl.LOCK_EX)
        file.write(canonical_json(body) + "\n")
        file.flush()
        os.fsync(file.fileno())
    return Anchor(body["anchored_at"], key_id, {stream: (sequence, digest) for stream, sequence, digest in heads})


def anchor_latest() -> Anchor | None:
    """The last anchor of the file, its signature checked; None if no anchor was written yet.
    Raises AnchorError if it cannot be trusted."""
    path = anchor_path()
    try:
        line = _last_line(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AnchorError(f"{path}: cannot be read ({exc.strerror}).") from None
    if line is None:
        return None
    try:
        body = json.loads(line)
        signature, key_id = body.pop("signature"), body["key_id"]
        heads = {stream: (int(sequence), str(digest)) for stream, sequence, digest in body["heads"]}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AnchorError(f"{path}: the last anchor is not a well-formed anchor line.") from None
    secret = settings.ARBITER_AUDIT_KEYS.get(key_id)
    if secret is None:
        raise AnchorError(f"{path}: the last anchor is signed with audit key {key_id!r}, which "
                          f"ARBITER_AUDIT_KEYS does not hold.")
    if not isinstance(signature, str) or not hmac.compare_digest(signature, _signature(body, secret)):
        raise AnchorError(f"{path}: the signature of the last anchor ({body.get('anchored_at')}) does not "
                          f"match its content: the anchor file was changed.")
    return Anchor(str(body["anchored_at"]), key_id, heads)


def _last_line(path: Path) -> str | None:
    """The last non-empty line, read backwards from the end (the file only grows)."""
    with open(path, "rb") as file:
        file.seek(0, os.SEEK_END)
        end = file.tell()
        tail = b""
        while end > 0:
            step = min(65536, end)
            end -= step
            file.seek(end)
            tail = file.read(step) + tail
            stripped = tail.rstrip(b"\n")
            if b"\n" in stripped:
                return stripped.rsplit(b"\n", 1)[1].decode("utf-8")
        stripped = tail.rstrip(b"\n")
        return stripped.decode("utf-8") if stripped else None
