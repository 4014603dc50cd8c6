"""The hand-labelled narrative sets of the signals (analyst/data/signals; RUBRIC.md says what each
signal means, each set's SOURCE.md where its narratives come from and how they were chosen).

- the 191 narratives of the classifier's sample (`labels.jsonl` beside RUBRIC.md), split by
  analyst.splits like the sample itself;
- `blind` (300), `tuning` (160) and `tuning2` (210): the sets the rules were tuned on (the blind
  set was measured three times after rules changed) and the sentence reader is trained on; the
  shipped product and issue classifier learns from their CFPB labels too (`classifier_examples`);
- `heldout` (200): the first held-out set, measured twice and read twice (its labels have a second,
  independent reading); since the second held-out set was labelled, the rules are tuned on it and
  the sentence reader learns from it too — the classifier does not;
- `heldout2` (193): the second held-out set, measured once (three of ten signals met the target
  there); since the third was labelled, the rules are tuned on it and the reader learns from it —
  the classifier does not;
- `heldout3` (200): never tuned or trained on; the signal figures that count are measured here.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from agents.text import clean_narrative
from analyst.examples import DATA_FILE, Example, load_examples
from analyst.splits import split_of

SIGNAL_LABELS = Path(__file__).resolve().parent / "data" / "signals" / "labels.jsonl"
BLIND_SPLIT, TUNING_SPLIT, TUNING2_SPLIT = "blind", "tuning", "tuning2"
HELDOUT_SPLIT, HELDOUT2_SPLIT, HELDOUT3_SPLIT = "heldout", "heldout2", "heldout3"
BLIND_CSV = SIGNAL_LABELS.parent / "blind" / "complaints.csv"
BLIND_LABELS = SIGNAL_LABELS.parent / "blind" / "labels.jsonl"
TUNING_CSV = SIGNAL_LABELS.parent / "tuning" / "complaints.csv"
TUNING_LABELS = SIGNAL_LABELS.parent / "tuning" / "labels.jsonl"
TUNING2_CSV = SIGNAL_LABELS.parent / "tuning2" / "complaints.csv"
TUNING2_LABELS = SIGNAL_LABELS.parent / "tuning2" / "labels.jsonl"
HELDOUT_CSV = SIGNAL_LABELS.parent / "heldout" / "complaints.csv"
HELDOUT_LABELS = SIGNAL_LABELS.parent / "heldout" / "labels.jsonl"
# A second, independent reading of the held-out set (its SOURCE.md: how far two readings agree).
HELDOUT_SECOND_READING = SIGNAL_LABELS.parent / "heldout" / "labels_second_reading.jsonl"
HELDOUT2_CSV = SIGNAL_LABELS.parent / "heldout2" / "complaints.csv"
HELDOUT2_LABELS = SIGNAL_LABELS.parent / "heldout2" / "labels.jsonl"
HELDOUT3_CSV = SIGNAL_LABELS.parent / "heldout3" / "complaints.csv"
HELDOUT3_LABELS = SIGNAL_LABELS.parent / "heldout3" / "labels.jsonl"
# The signal sets kept apart from the sample, by split name: (their CSV, their labels).
SIGNAL_SETS = {BLIND_SPLIT: (BLIND_CSV, BLIND_LABELS), TUNING_SPLIT: (TUNING_CSV, TUNING_LABELS),
               TUNING2_SPLIT: (TUNING2_CSV, TUNING2_LABELS), HELDOUT_SPLIT: (HELDOUT_CSV, HELDOUT_LABELS),
               HELDOUT2_SPLIT: (HELDOUT2_CSV, HELDOUT2_LABELS), HELDOUT3_SPLIT: (HELDOUT3_CSV, HELDOUT3_LABELS)}
# What the sentence reader learns from: every set but the third held-out one.
TRAINING_SETS = ((DATA_FILE, SIGNAL_LABELS), (BLIND_CSV, BLIND_LABELS), (TUNING_CSV, TUNING_LABELS),
                 (TUNING2_CSV, TUNING2_LABELS), (HELDOUT_CSV, HELDOUT_LABELS), (HELDOUT2_CSV, HELDOUT2_LABELS))


# What the shipped classifier learns from besides its sample: the blind and both tuning sets'
# complaints, with their CFPB product and issue labels (never a held-out set's).
CLASSIFIER_SETS = (BLIND_CSV, TUNING_CSV, TUNING2_CSV)


def labelled_quotes(path: Path) -> dict[str, dict[str, str | None]]:
    """{complaint id: {signal: its quote when present, else None}} of one labels file."""
    labels: dict[str, dict[str, str | None]] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                item = json.loads(line)
                labels.setdefault(str(item["complaint_id"]).strip(), {})[item["signal"]] = \
                    (item.get("quote") or None) if item["present"] else None
    return labels


def _narratives(path: Path) -> set[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return {clean_narrative(row.get("Consumer complaint narrative")) for row in csv.DictReader(handle)}


def _never_trained_on(*paths: Path) -> set[str]:
    """The narratives of `paths`: no model learns from a text that is also one of theirs."""
    return set().union(*(_narratives(path) for path in paths))


def training_narratives(splits: tuple[str, ...] | None = None) -> list[tuple[str, dict[str, str | None]]]:
    """(narrative, labels) of every labelled complaint of TRAINING_SETS; with `splits`, the sample's
    complaints only of those evaluation splits (the signal sets are never evaluation splits of it).
    A narrative whose text is also one of the third held-out set's is left out: consumers file one
    letter against several companies, under several Complaint IDs (two of its narratives repeat one
    of each earlier held-out set and of the second tuning set word for word)."""
    held_out = _never_trained_on(HELDOUT3_CSV)
    narratives = []
    for data, labels_path in TRAINING_SETS:
        labels = labelled_quotes(labels_path)
        with open(data, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                complaint = (row.get("Complaint ID") or "").strip()
                text = clean_narrative(row.get("Consumer complaint narrative"))
                if complaint not in labels or text in held_out or (
                        splits and data == DATA_FILE and split_of(complaint) not in splits):
                    continue
                narratives.append((text, labels[complaint]))
    return narratives


def classifier_examples() -> list[Example]:
    """The complaints of CLASSIFIER_SETS as classifier examples, in file order, without a narrative
    that is also one of any held-out set (their triage figures stay unseen) or of the sample (the
    sample's evaluation splits stay unseen by a model trained on the others) — nor one already taken
    from an earlier set. They fall into the hash split by their Complaint ID like the sample's rows."""
    seen = _never_trained_on(HELDOUT_CSV, HELDOUT2_CSV, HELDOUT3_CSV, DATA_FILE)
    examples = []
    for path in CLASSIFIER_SETS:
        for example in load_examples(path):
            if example.text not in seen:
                seen.add(example.text)
                examples.append(example)
    return examples


def data_files() -> list[Path]:
    """The files the sentence reader's training reads (the classifier's artifact fingerprints them)."""
    return [*(path for pair in TRAINING_SETS for path in pair), HELDOUT3_CSV]
