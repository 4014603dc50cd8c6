"""manage.py analyze <case-ref> [--tenant SLUG] [--wait] [--inline] [--provider NAME]

Starts a case analysis. --inline executes it in this process through the same executor (same
leases, same one-transaction-per-step commits) with no worker; --wait waits for a worker to finish
it. Either way the outcome is printed: status, steps, findings, proposals, notices drafted.

--wait says at once when no worker is alive ("no worker has been seen since ..."), and exits 1 with
a clear message when the run has not finished after --timeout seconds (ARBITER_ANALYZE_WAIT_SECONDS
by default). The run is committed before anything is published (through the outbox), so a broker
outage delays it and the command still succeeds in starting it."""

import time

from django.conf import settings
from django.core.management.base import CommandError

from cases.models import Case
from core.commands import DatabaseCommand
from core.errors import DomainError
from outbox.selectors import worker_status
from runs.management.common import actor_from, add_actor_argument, drive_here, write_outcome
from runs.models import AgentRun, RunStatus
from runs.services import run_start


class Command(DatabaseCommand):
    help = "Analyse a case with the agents (proposals and drafts only; nothing in the case changes)."

    def add_arguments(self, parser):
        parser.add_argument("reference", help="The case reference, e.g. CASE-2026-000001.")
        parser.add_argument("--tenant", help="Tenant slug (needed when several tenants use the reference).")
        parser.add_argument("--wait", action="store_true", help="Wait for a worker to finish the run.")
        parser.add_argument("--inline", action="store_true", help="Execute the run in this process.")
        parser.add_argument("--provider", help="Model provider (default: ARBITER_MODEL_PROVIDER).")
        parser.add_argument("--timeout", type=float, default=None,
                            help="Seconds --wait/--inline wait before giving up (default: "
                                 "ARBITER_ANALYZE_WAIT_SECONDS, 600).")
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

        try:
            run = run_start(actor=actor_from(options), case=found[0], provider=options["provider"],
                            enqueue=not options["inline"])
        except DomainError as exc:
            raise CommandError(f"{exc.message} {exc.fields or ''}".strip()) from exc
        if getattr(run, "already_active", False):
            self.stdout.write(f"An analysis of {found[0].reference} is already {run.status}: run R{run.pk}.")
        else:
            self.stdout.write(f"Started run R{run.pk} on {found[0].reference}.")
        timeout = options["timeout"] if options["timeout"] is not None else settings.ARBITER_ANALYZE_WAIT_SECONDS
        if options["inline"]:
            run = drive_here(run, timeout_seconds=timeout, say=self.stdout.write,
                             on_step=lambda o: self.stdout.write(f"  step {o.sequence} done ({o.status})"))
        elif options["wait"]:
            run = wait_for(run.pk, timeout, say=self.stderr.write)
            if not (run.is_finished or run.status == RunStatus.WAITING):
                write_outcome(self.stdout, run)
                why = _no_worker_message() or "A worker is alive but has not finished it yet."
                raise CommandError(f"Run R{run.pk} is still {run.status} after {timeout:g}s. {why} It is not lost: "
                                   f"it runs when a worker takes it; look at run R{run.pk} later.")
        else:
            self.stdout.write("Queued: a worker will execute it (manage.py analyze --inline runs it here).")
            if _no_worker_message():
                self.stderr.write(_no_worker_message())
        write_outcome(self.stdout, run)
        if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            raise SystemExit(1)


def _no_worker_message() -> str:
    return worker_status().message


def wait_for(run_id: int, timeout: float, *, say=None) -> AgentRun:
    """Poll the run until it finishes or waits, or `timeout` passes; `say` hears (once, and again
    if it changes) that no worker is alive, so nobody waits in silence."""
    deadline = time.monotonic() + timeout
    said = None
    while True:
        run = AgentRun.objects.get(pk=run_id)
        if run.is_finished or run.status == RunStatus.WAITING or time.monotonic() > deadline:
            return run
        if say is not None:
            message = _no_worker_message()
            if message and message != said:
                say(message)
            said = message
        time.sleep(0.5)
