from django.core.management.base import BaseCommand, CommandError

from audit.verify import verify_all


class Command(BaseCommand):
    help = "Walk every audit hash chain and name the first event that does not match."

    def add_arguments(self, parser):
        parser.add_argument("--stream", action="append", help="Only this stream (e.g. case:12); repeatable.")

    def handle(self, *args, stream=None, **options):
        checked, breaks = verify_all(stream)
        for b in breaks:
            where = f"event id={b.event_id}" if b.event_id else "stream head"
            self.stderr.write(f"BROKEN {b.stream} at sequence {b.sequence} ({where}): {b.reason}")
        if breaks:
            raise CommandError(f"{len(breaks)} of {checked} audit streams are broken.")
        self.stdout.write(self.style.SUCCESS(f"OK: {checked} audit streams verified."))
