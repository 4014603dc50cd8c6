"""`manage.py dashboard_refresh [--tenant SLUG]`: rebuild the dashboard's facts now."""

from django.core.management.base import CommandError

from accounts.models import Tenant
from core.commands import DatabaseCommand
from reports.services import dashboard_refresh, dashboard_refresh_all


class Command(DatabaseCommand):
    help = "Rebuild the supervisor's dashboard facts (all tenants, or one)."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="The tenant's slug; every tenant without it.")

    def handle(self, *args, tenant=None, **options):
        if tenant is None:
            count = dashboard_refresh_all()
            self.stdout.write(f"Refreshed the dashboard of {count} tenant(s).")
            return
        tenant_id = Tenant.objects.filter(slug=tenant).values_list("pk", flat=True).first()
        if tenant_id is None:
            raise CommandError(f"No tenant with the slug {tenant!r}.")
        refresh = dashboard_refresh(tenant_id=tenant_id)
        self.stdout.write(f"Refreshed the dashboard of {tenant}: {refresh.cases} case(s) in {refresh.duration_ms} ms.")
