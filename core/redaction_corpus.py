"""Measuring core.redaction on a labelled corpus (tests/data/redaction_corpus.jsonl).

Each line is {"personal": bool, "category": str, "text": str}. In a personal line the spans of
personal data are marked ⟦like this⟧; a line without personal data must come out unchanged.

- recall: the share of marked spans the redactor removes entirely (every character of the span
  inside a replaced span: a phone number with its last four digits left is not removed);
- false-positive rate: the share of lines without personal data that the redactor changes at all.
Both are given overall and per category."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from core.redaction import find_personal_data, redact_personal_data

_MARKED = re.compile(r"⟦(.*?)⟧")


@dataclass(frozen=True)
class Example:
    personal: bool
    category: str
    text: str  # without the marks
    spans: tuple[tuple[int, int], ...]


@dataclass
class Tally:
    total: int = 0
    hits: int = 0  # spans removed (recall) or lines changed (false positives)

    @property
    def rate(self) -> float:
        return self.hits / self.total if self.total else 0.0


@dataclass
class Report:
    recall: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    false_positives: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    missed: list[tuple[str, str, str]] = field(default_factory=list)  # (category, span, redacted line)
    changed: list[tuple[str, str, str]] = field(default_factory=list)  # (category, line, redacted line)

    @staticmethod
    def overall(tallies: dict[str, Tally]) -> Tally:
        return Tally(total=sum(t.total for t in tallies.values()), hits=sum(t.hits for t in tallies.values()))


def parse_line(raw: dict) -> Example:
    marked = str(raw["text"])
    spans, plain, position = [], [], 0
    for match in _MARKED.finditer(marked):
        plain.append(marked[position:match.start()])
        start = sum(len(piece) for piece in plain)
        plain.append(match.group(1))
        spans.append((start, start + len(match.group(1))))
        position = match.end()
    plain.append(marked[position:])
    personal = bool(raw["personal"])
    if personal != bool(spans):
        raise ValueError(f"A line marked personal={personal} has {len(spans)} marked span(s): {marked!r}")
    return Example(personal=personal, category=str(raw["category"]), text="".join(plain), spans=tuple(spans))


def load_corpus(path: Path) -> list[Example]:
    with open(path, encoding="utf-8") as handle:
        return [parse_line(json.loads(line)) for line in handle if line.strip()]


def evaluate(examples: list[Example]) -> Report:
    report = Report()
    for example in examples:
        redacted = redact_personal_data(example.text)
        if not example.personal:
            tally = report.false_positives[example.category]
            tally.total += 1
            if redacted != example.text:
                tally.hits += 1
                report.changed.append((example.category, example.text, redacted))
            continue
        replaced = [(span.start, span.end) for span in find_personal_data(example.text)]
        for start, end in example.spans:
            tally = report.recall[example.category]
            tally.total += 1
            covered = all(any(a <= index < b for a, b in replaced) for index in range(start, end))
            if covered:
                tally.hits += 1
            else:
                report.missed.append((example.category, example.text[start:end], redacted))
    return report
