"""manage.py drift_report [--tenant SLUG] [--check NAME ...]

Runs the drift checks registered in ops.drift.CHECKS, prints each finding with the objects it
involves, and exits 1 when it found drift (0 when none), so it can gate a deploy or page someone."""

from django.core.management.base import CommandError

from accounts.models import Tenant
from core.commands import DatabaseCommand
from ops.drift import CHECKS, run_drift_checks


class Command(DatabaseCommand):
    help = "Report where projections (artifacts, runs, memory, pending decisions) drifted from the domain."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Only this tenant (slug).")
        parser.add_argument("--check", action="append", choices=sorted(CHECKS), help="Only these checks.")

    def handle(self, *args, **options):
        tenant_id = None
        if options["tenant"]:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant {options['tenant']!r}.")
            tenant_id = tenant.pk
        findings = run_drift_checks(tenant_id=tenant_id, only=options["check"])
        checks = options["check"] or sorted(CHECKS)
        if not findings:
            self.stdout.write(f"No drift found ({len(checks)} check(s): {', '.join(checks)}).")
            return
        for finding in findings:
            self.stdout.write(str(finding))
        self.stdout.write(f"{len(findings)} drift finding(s).")
        raise SystemExit(1)
