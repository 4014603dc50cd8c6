"""manage.py run_cancel <run-id> [--reason TEXT]"""

from django.core.management.base import CommandError

from core.commands import DatabaseCommand
from core.errors import DomainError
from runs.management.common import actor_from, add_actor_argument, get_run
from runs.services import run_cancel


class Command(DatabaseCommand):
    help = "Cancel a run; one in the middle of a step stops when that step ends."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--reason", default="")
        add_actor_argument(parser)

    def handle(self, *args, **options):
        try:
            run = run_cancel(actor=actor_from(options), run=get_run(options["run_id"]), reason=options["reason"])
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        if run.status == "cancelled":
            self.stdout.write(f"Run R{run.pk} cancelled.")
        else:
            self.stdout.write(f"Run R{run.pk} will stop when its current step ends.")
