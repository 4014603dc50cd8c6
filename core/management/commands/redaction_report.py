"""`manage.py redaction_report`: recall and false-positive rate of the personal-data redactor on
the labelled corpus, overall and per category, with the lines it got wrong."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.redaction_corpus import Report, evaluate, load_corpus

DEFAULT_CORPUS = Path(settings.BASE_DIR) / "tests" / "data" / "redaction_corpus.jsonl"
RECALL_TARGET = 0.98
FALSE_POSITIVE_TARGET = 0.02


class Command(BaseCommand):
    help = "Recall and false-positive rate of core.redaction on a labelled corpus (JSON lines)."

    def add_arguments(self, parser):
        parser.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="JSON-lines corpus to measure on.")
        parser.add_argument("--show-errors", action="store_true", help="List every missed span and changed line.")

    def handle(self, *args, corpus, show_errors, **options):
        path = Path(corpus)
        if not path.is_file():
            raise CommandError(f"No corpus at {path}.")
        try:
            examples = load_corpus(path)
        except (ValueError, KeyError) as error:
            raise CommandError(f"The corpus at {path} cannot be read: {error}") from error
        report = evaluate(examples)
        recall, false_positives = Report.overall(report.recall), Report.overall(report.false_positives)
        write = self.stdout.write
        write(f"Corpus: {path} ({len(examples)} lines)")
        write(f"Recall: {recall.rate:.1%} ({recall.hits} of {recall.total} marked spans removed; "
              f"target >= {RECALL_TARGET:.0%})")
        for category, tally in sorted(report.recall.items()):
            write(f"  {category:<16} {tally.rate:7.1%}  ({tally.hits}/{tally.total})")
        write(f"False positives: {false_positives.rate:.1%} ({false_positives.hits} of {false_positives.total} "
              f"lines without personal data changed; target <= {FALSE_POSITIVE_TARGET:.0%})")
        for category, tally in sorted(report.false_positives.items()):
            write(f"  {category:<16} {tally.rate:7.1%}  ({tally.hits}/{tally.total})")
        if show_errors:
            for category, span, redacted in report.missed:
                write(f"missed [{category}] {span!r} in: {redacted}")
            for category, line, redacted in report.changed:
                write(f"changed [{category}] {line!r} -> {redacted!r}")
