"""A word-level diff of two texts, for a notice shown next to the one it replaces."""

from __future__ import annotations

import difflib
import re

TOKEN = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> list[dict]:
    """Segments of `new` against `old`: {"op": "same" | "added" | "removed", "text": ...}. Removed
    text comes just before what replaced it. Whitespace stays attached, so the joined "same" and
    "added" segments are exactly `new`."""
    before, after = TOKEN.findall(old or ""), TOKEN.findall(new or "")
    segments: list[dict] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            segments.append({"op": "same", "text": "".join(after[j1:j2])})
            continue
        if tag in ("delete", "replace"):
            segments.append({"op": "removed", "text": "".join(before[i1:i2])})
        if tag in ("insert", "replace"):
            segments.append({"op": "added", "text": "".join(after[j1:j2])})
    return segments


def has_changes(segments: list[dict]) -> bool:
    return any(segment["op"] != "same" for segment in segments)
