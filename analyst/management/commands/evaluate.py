"""manage.py evaluate [<labelled.csv>] [--provider NAME] [--json OUT] [--limit N] [--split test|dev|train|all|heldout3|heldout2|heldout|blind|tuning|tuning2]

Measures the agents on labelled CFPB-format complaints: each row becomes a throwaway case (labels
blanked) in a throwaway tenant, inside one transaction that is rolled back — real cases are never
read or touched. See analyst/evaluation.py for the split and what is measured. `--split heldout3`
evaluates the third held-out signal set (analyst/data/signals/heldout3/), which nothing is tuned or
trained on, against its own labels; `--split heldout2`, `heldout`, `blind`, `tuning` and `tuning2` the sets the
signal detectors learn from (analyst.signal_sets; the shipped classifier learns from the last three
too: their triage figures are training figures, and the command says so); the CSV may then be left
out."""

import json
import sqlite3
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connections

from analyst.evaluation import (
    evaluate_rows,
    format_report,
    read_rows,
    read_signal_labels,
    report,
    select_rows,
)
from analyst.signal_sets import (
    CLASSIFIER_SETS,
    SIGNAL_LABELS,
    SIGNAL_SETS,
)
from core.commands import DatabaseCommand


def use_private_sqlite_copy(directory: str) -> Path | None:
    """On a SQLite file, switch the default connection to a copy of the database in `directory`.

    The evaluation is one transaction rolled back at the end; on SQLite that transaction holds the
    database's single write lock for its whole length (minutes), so the web, worker and beat of a
    `make run` beside it would wait and then fail with "database is locked". Nothing it writes is
    kept anyway, so it runs on a private copy (SQLite's online backup: consistent under WAL while
    others write). Returns the copy's path, or None when nothing was switched (PostgreSQL, where
    row locks keep the evaluation out of everyone's way, or an in-memory database)."""
    connection = connections["default"]
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return None
    copy = Path(directory) / "evaluate.sqlite3"
    source, target = sqlite3.connect(connection.settings_dict["NAME"]), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    connection.close()
    connection.settings_dict["NAME"] = str(copy)
    return copy


class Command(DatabaseCommand):
    help = "Evaluate the agents on labelled CFPB complaints (throwaway cases, rolled back)."

    def add_arguments(self, parser):
        parser.add_argument("csv", nargs="?",
                            help="A CFPB-format CSV with Product, Issue, Tags and narratives "
                                 "(default with --split heldout3, heldout2, heldout, blind, tuning or tuning2: that signal set).")
        parser.add_argument("--provider", help="Model provider (default: ARBITER_MODEL_PROVIDER).")
        parser.add_argument("--json", dest="json_out", help="Also write the figures as JSON to this file.")
        parser.add_argument("--limit", type=int, help="Evaluate at most N complaints (after the split).")
        parser.add_argument("--run-seconds", type=int, default=300, dest="run_seconds",
                            help="How long one analysis may run before it is counted unfinished (default 300; "
                                 "a small local model needs about 1,200 on this kind of machine).")
        parser.add_argument("--signal-labels", dest="signal_labels",
                            help="Hand labels of the narrative signals (default: analyst/data/signals/labels.jsonl, "
                                 "or that set's labels.jsonl with a signal set's --split).")
        parser.add_argument("--split", default="test", choices=("train", "dev", "test", "all", *SIGNAL_SETS),
                            help="Which side of the fixed hash split to evaluate (default: test, the held-out side); "
                                 "heldout3: every row of the third held-out signal set, never tuned or trained on; "
                                 "heldout2, heldout, blind, tuning, tuning2: every row of a set the signal detectors learn "
                                 "from.")

    def progress(self, total: int):
        """One line per analysis as it ends (a small local model takes minutes each)."""
        done = []

        def report_one(outcome) -> None:
            done.append(outcome)
            self.stdout.write(f"[{len(done)}/{total}] complaint {outcome.complaint_id}: run {outcome.run_status or '—'} "
                              f"in {outcome.seconds:.0f} s; {outcome.predicted_product or 'no product'} / "
                              f"{outcome.predicted_issue or 'no issue'}; {outcome.drafts} notice(s)"
                              + (f"\n    why: {outcome.error[:300]}" if outcome.error else ""))
            self.stdout.flush()

        return report_one

    def handle(self, *args, **options):
        own_set = SIGNAL_SETS.get(options["split"])  # (csv, labels) of a signal set
        if not options["csv"] and not own_set:
            raise CommandError("Give the path of a CFPB-format CSV "
                               "(it may be left out only with --split heldout3, heldout2, heldout, blind, tuning or tuning2).")
        path = Path(options["csv"] or own_set[0])
        if not path.is_file():
            raise CommandError(f"No file {path}: give the path of a CFPB-format CSV.")
        if options["limit"] is not None and options["limit"] < 1:
            raise CommandError("--limit must be at least 1.")
        if options["run_seconds"] < 1:
            raise CommandError("--run-seconds must be at least 1.")
        try:
            rows = read_rows(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Could not read {path}: {exc}") from exc
        missing = {"Product", "Issue", "Consumer complaint narrative", "Complaint ID"} - set(rows[0] if rows else {})
        if missing:
            raise CommandError(f"{path} is not a CFPB-format CSV: missing column(s) {', '.join(sorted(missing))}.")
        labels_path = Path(options["signal_labels"] or (own_set[1] if own_set else SIGNAL_LABELS))
        try:
            signal_labels = read_signal_labels(labels_path)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CommandError(f"Could not read the signal labels {labels_path}: {exc}") from exc
        chosen = select_rows(rows, split=options["split"], limit=options["limit"])
        if not chosen:
            raise CommandError(f"No labelled complaint with a narrative on the {options['split']} split of {path}.")
        provider = options["provider"] or settings.ARBITER_MODEL_PROVIDER
        self.stdout.write(f"Evaluating {len(chosen)} complaint(s) from {path} ({options['split']} split) "
                          f"with provider {provider}; everything is rolled back afterwards.")
        connection = connections["default"]
        original_name = connection.settings_dict["NAME"]
        with tempfile.TemporaryDirectory(prefix="arbiter-evaluate-") as directory:
            copy = use_private_sqlite_copy(directory)
            if copy is not None:
                self.stdout.write("SQLite: evaluating on a private copy of the database, so the processes "
                                  "beside this one keep writing.")
            # A signal set is analysed with the shipped classifier: it has not seen a held-out set's
            # rows, and it learnt from the other sets' (said below). The sample trains on its train side.
            scope = None if own_set and path == Path(own_set[0]) else ("train",)
            outcomes = evaluate_rows(chosen, provider=options["provider"], run_seconds=options["run_seconds"],
                                     on_outcome=self.progress(len(chosen)), scope=scope, say=self.stdout.write)
            if copy is not None:  # let go of the copy before its folder goes; back to the real database
                connection.close()
                connection.settings_dict["NAME"] = original_name
        data = report(outcomes, split=options["split"], provider=provider,
                      threshold=getattr(settings, "ARBITER_TRIAGE_MIN_CONFIDENCE", None), signal_labels=signal_labels)
        if own_set and path.resolve() in {csv.resolve() for csv in CLASSIFIER_SETS}:
            data["triage_trained_on_these_complaints"] = True
            self.stdout.write(f"Note: the shipped classifier learnt product and issue from the {options['split']} "
                              "set's complaints, so its triage figures here are training figures; --split heldout3 "
                              "measures complaints it never saw.")
        for line in format_report(data):
            self.stdout.write(line)
        if options["json_out"]:
            Path(options["json_out"]).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            self.stdout.write(f"Figures written to {options['json_out']}.")
