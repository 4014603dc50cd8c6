"""manage.py run_fork <run-id> --from-step N [--provider NAME] [--inline]"""

from django.core.management.base import CommandError

from core.commands import DatabaseCommand
from core.errors import DomainError
from runs.management.common import actor_from, add_actor_argument, drive_here, get_run, write_outcome
from runs.services import run_fork


class Command(DatabaseCommand):
    help = "Start a new run from a run's checkpoint after step N; both runs stay inspectable."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--from-step", type=int, required=True, dest="from_step",
                            help="Fork from the checkpoint after this step (0 = the start).")
        parser.add_argument("--provider", help="Model provider for the fork (default: the parent's).")
        parser.add_argument("--inline", action="store_true")
        parser.add_argument("--timeout", type=float, default=600)
        add_actor_argument(parser)

    def handle(self, *args, **options):
        parent = get_run(options["run_id"])
        try:
            fork = run_fork(actor=actor_from(options), run=parent, from_sequence=options["from_step"],
                            provider=options["provider"], enqueue=not options["inline"])
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Forked R{parent.pk} after step {options['from_step']} into R{fork.pk}.")
        if options["inline"]:
            fork = drive_here(fork, timeout_seconds=options["timeout"], say=self.stdout.write)
        write_outcome(self.stdout, fork)
