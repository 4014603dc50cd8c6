import time

from django.core.management.base import CommandError

from audit.verify import verify_ledger
from core.commands import DatabaseCommand


def _natural(chain_break) -> tuple:
    """case:9 before case:10 (the scan itself walks streams in byte order)."""
    kind, _, rest = chain_break.stream.partition(":")
    return (kind, int(rest) if rest.isdigit() else 0, rest)


class Command(DatabaseCommand):
    help = ("Walk every audit hash chain and name the first event that does not match, and check the ledger "
            "against the latest signed anchor. --since resumes each stream from its last verified head (a "
            "nightly check then costs what was appended). A broken stream's verified head is never moved.")

    def add_arguments(self, parser):
        parser.add_argument("--stream", action="append", help="Only this stream (e.g. case:12); repeatable.")
        parser.add_argument("--since", action="store_true",
                            help="Verify only what was appended since each stream's last verified head.")

    def handle(self, *args, stream=None, since=False, **options):
        started = time.monotonic()
        result = verify_ledger(stream, since=since)
        for b in sorted(result.breaks, key=_natural):
            where = f"event id={b.event_id}" if b.event_id else "stream head"
            self.stderr.write(f"BROKEN {b.stream} at sequence {b.sequence} ({where}): {b.reason}")
        if result.anchor_error:
            self.stderr.write(f"ANCHOR {result.anchor_error}")
        if result.breaks:
            raise CommandError(f"{len(result.breaks)} of {result.streams} audit streams are broken.")
        if result.anchor_error:
            raise CommandError("The latest audit anchor cannot be trusted.")
        self.stdout.write(self.style.SUCCESS(f"OK: {result.streams} audit streams verified."))
        if options["verbosity"] > 1:
            elapsed = time.monotonic() - started
            self.stdout.write(f"{result.events} events read in {elapsed:.1f} s"
                              + (" (since the last verified heads)" if since else ""))
            self.stdout.write(f"checked against the anchor of {result.anchor.anchored_at} ({len(result.anchor.heads)} "
                              f"streams)" if result.anchor else "no anchor written yet (manage.py audit_anchor)")
