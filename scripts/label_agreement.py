"""How two readings of the same narratives agree, per signal (analyst.evaluation.label_agreement).

    DEBUG=1 .venv/bin/python scripts/label_agreement.py FIRST.jsonl SECOND.jsonl

Both files in the labels format of analyst/data/signals (RUBRIC.md). Prints, per signal, the
positives of each reading, those in both, the second reading's recall and precision against the
first, and Cohen's kappa."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from analyst.evaluation import label_agreement, read_signal_labels  # noqa: E402


def _pct(value) -> str:
    return "—" if value is None else f"{value:.0%}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="How two readings of the same narratives agree, per signal.")
    parser.add_argument("first", help="the first reading (a labels .jsonl file)")
    parser.add_argument("second", help="the second reading of the same narratives")
    args = parser.parse_args(argv)
    try:
        first, second = read_signal_labels(Path(args.first)), read_signal_labels(Path(args.second))
    except OSError as exc:
        print(f"Could not read a labels file: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"Not a labels file (one JSON object a line with complaint_id, signal, present): {exc}",
              file=sys.stderr)
        return 2
    figures = label_agreement(first, second)
    if not any(part["complaints"] for part in figures.values()):
        print("The two files judge no complaint and signal in common: nothing to compare.", file=sys.stderr)
        return 2
    print(f"{'signal':15} {'n':>4} {'first':>6} {'second':>7} {'both':>5} {'recall':>7} {'precision':>10} {'kappa':>6}")
    for code, part in figures.items():
        kappa = "—" if part["kappa"] is None else part["kappa"]
        print(f"{code:15} {part['complaints']:>4} {part['first']:>6} {part['second']:>7} {part['both']:>5} "
              f"{_pct(part['recall']):>7} {_pct(part['precision']):>10} {kappa:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
