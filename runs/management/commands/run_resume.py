"""manage.py run_resume <run-id> [--inline]: continue a run from its last checkpoint."""

from django.core.management.base import CommandError

from core.commands import DatabaseCommand
from core.errors import DomainError
from runs.management.common import actor_from, add_actor_argument, drive_here, get_run, write_outcome
from runs.models import RunStatus
from runs.services import run_resume


class Command(DatabaseCommand):
    help = "Resume a waiting, failed or stalled run from its last checkpoint."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--inline", action="store_true", help="Execute the remaining steps in this process.")
        parser.add_argument("--timeout", type=float, default=600)
        add_actor_argument(parser)

    def handle(self, *args, **options):
        run = get_run(options["run_id"])
        try:
            run = run_resume(actor=actor_from(options), run=run, enqueue=not options["inline"])
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Resumed run R{run.pk} at step {run.next_sequence} ({run.current_node}).")
        if options["inline"]:
            run = drive_here(run, timeout_seconds=options["timeout"], say=self.stdout.write)
        write_outcome(self.stdout, run)
        if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            raise SystemExit(1)
