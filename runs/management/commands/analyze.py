"""manage.py analyze <case-ref> [--tenant SLUG] [--wait] [--inline] [--provider NAME]

Starts a case analysis. --inline executes it in this process through the same executor (same
leases, same one-transaction-per-step commits) with no worker; --wait waits for a worker to finish
it. Either way the outcome is printed: status, steps, findings, proposals, notices drafted."""

import time

from django.core.management.base import BaseCommand, CommandError

from cases.models import Case
from core.errors import DomainError
from runs.executor import drive_inline
from runs.management.common import actor_from, add_actor_argument, inline_worker_id, write_outcome
from runs.models import AgentRun, RunStatus


class Command(BaseCommand):
    help = "Analyse a case with the agents (proposals and drafts only; nothing in the case changes)."

    def add_arguments(self, parser):
        parser.add_argument("reference", help="The case reference, e.g. CASE-2026-000001.")
        parser.add_argument("--tenant", help="Tenant slug (needed when several tenants use the reference).")
        parser.add_argument("--wait", action="store_true", help="Wait for a worker to finish the run.")
        parser.add_argument("--inline", action="store_true", help="Execute the run in this process.")
        parser.add_argument("--provider", help="Model provider (default: ARBITER_MODEL_PROVIDER).")
        parser.add_argument("--timeout", type=float, default=600, help="Seconds to wait (default 600).")
        add_actor_argument(parser)

    def handle(self, *args, **options):
        cases = Case.objects.filter(reference=options["reference"])
        if options["tenant"]:
            cases = cases.filter(tenant__slug=options["tenant"])
        found = list(cases[:2])
        if not found:
            raise CommandError(f"No case {options['reference']}" + (f" in tenant {options['tenant']}."
                                                                    if options["tenant"] else "."))
        if len(found) > 1:
            raise CommandError(f"Several tenants have a case {options['reference']}; say which with --tenant.")
        from runs.services import run_start

        try:
            run = run_start(actor=actor_from(options), case=found[0], provider=options["provider"],
                            enqueue=not options["inline"])
        except DomainError as exc:
            raise CommandError(f"{exc.message} {exc.fields or ''}".strip()) from exc
        self.stdout.write(f"Started run R{run.pk} on {found[0].reference}.")
        if options["inline"]:
            run = drive_inline(run_id=run.pk, worker_id=inline_worker_id(), timeout_seconds=options["timeout"],
                               on_step=lambda o: self.stdout.write(f"  step {o.sequence} done ({o.status})"))
        elif options["wait"]:
            run = wait_for(run.pk, options["timeout"])
        else:
            self.stdout.write("Queued: a worker will execute it (manage.py analyze --inline runs it here).")
        write_outcome(self.stdout, run)
        if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            raise SystemExit(1)


def wait_for(run_id: int, timeout: float) -> AgentRun:
    deadline = time.monotonic() + timeout
    while True:
        run = AgentRun.objects.get(pk=run_id)
        if run.is_finished or run.status == RunStatus.WAITING or time.monotonic() > deadline:
            return run
        time.sleep(0.5)
