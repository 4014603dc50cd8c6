"""manage.py evaluate <labelled.csv> [--provider NAME] [--json OUT] [--limit N] [--split test|dev|train|all]

Measures the agents on labelled CFPB-format complaints: each row becomes a throwaway case (labels
blanked) in a throwaway tenant, inside one transaction that is rolled back — real cases are never
read or touched. See analyst/evaluation.py for the split and what is measured."""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Evaluate the agents on labelled CFPB complaints (throwaway cases, rolled back)."

    def add_arguments(self, parser):
        parser.add_argument("csv", help="A CFPB-format CSV with Product, Issue, Tags and narratives.")
        parser.add_argument("--provider", help="Model provider (default: ARBITER_MODEL_PROVIDER).")
        parser.add_argument("--json", dest="json_out", help="Also write the figures as JSON to this file.")
        parser.add_argument("--limit", type=int, help="Evaluate at most N complaints (after the split).")
        parser.add_argument("--split", default="test", choices=("train", "dev", "test", "all"),
                            help="Which side of the fixed hash split to evaluate (default: test, the held-out side).")

    def handle(self, *args, **options):
        from analyst.evaluation import evaluate_rows, format_report, read_rows, report, select_rows

        path = Path(options["csv"])
        if not path.is_file():
            raise CommandError(f"No file {path}: give the path of a CFPB-format CSV.")
        if options["limit"] is not None and options["limit"] < 1:
            raise CommandError("--limit must be at least 1.")
        try:
            rows = read_rows(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"Could not read {path}: {exc}") from exc
        missing = {"Product", "Issue", "Consumer complaint narrative", "Complaint ID"} - set(rows[0] if rows else {})
        if missing:
            raise CommandError(f"{path} is not a CFPB-format CSV: missing column(s) {', '.join(sorted(missing))}.")
        chosen = select_rows(rows, split=options["split"], limit=options["limit"])
        if not chosen:
            raise CommandError(f"No labelled complaint with a narrative on the {options['split']} split of {path}.")
        provider = options["provider"] or settings.ARBITER_MODEL_PROVIDER
        self.stdout.write(f"Evaluating {len(chosen)} complaint(s) from {path} ({options['split']} split) "
                          f"with provider {provider}; everything is rolled back afterwards.")
        outcomes = evaluate_rows(chosen, provider=options["provider"])
        data = report(outcomes, split=options["split"], provider=provider,
                      threshold=getattr(settings, "ARBITER_TRIAGE_MIN_CONFIDENCE", None))
        for line in format_report(data):
            self.stdout.write(line)
        if options["json_out"]:
            Path(options["json_out"]).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            self.stdout.write(f"Figures written to {options['json_out']}.")
