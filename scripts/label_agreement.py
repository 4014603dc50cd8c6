"""How two readings of the same narratives agree, per signal (analyst.evaluation.label_agreement).

    DEBUG=1 .venv/bin/python scripts/label_agreement.py FIRST.jsonl SECOND.jsonl

Both files in the labels format of analyst/data/signals (RUBRIC.md). Prints, per signal, the
positives of each reading, those in both, the second reading's recall and precision against the
first, and Cohen's kappa."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from analyst.evaluation import label_agreement, read_signal_labels  # noqa: E402


def main(first: str, second: str) -> None:
    figures = label_agreement(read_signal_labels(Path(first)), read_signal_labels(Path(second)))
    print(f"{'signal':15} {'n':>4} {'first':>6} {'second':>7} {'both':>5} {'recall':>7} {'precision':>10} {'kappa':>6}")
    for code, part in figures.items():
        def pct(value):
            return "—" if value is None else f"{value:.0%}"
        print(f"{code:15} {part['complaints']:>4} {part['first']:>6} {part['second']:>7} {part['both']:>5} "
              f"{pct(part['recall']):>7} {pct(part['precision']):>10} {part['kappa'] if part['kappa'] is not None else '—':>6}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
