"""manage.py api_key create <name> --tenant <slug> --role <role> [--expires-days N]
manage.py api_key revoke <prefix>
manage.py api_key list [--tenant <slug>]

The key is printed once by `create` and never stored (only its sha256)."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandError
from django.utils import timezone

from accounts.models import ApiKey, Role, Tenant
from accounts.services import api_key_create, api_key_revoke
from core.commands import DatabaseCommand
from core.errors import DomainError


class Command(DatabaseCommand):
    help = "Create, revoke or list API keys for integrations."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a key; it is printed once.")
        create.add_argument("name")
        create.add_argument("--tenant", required=True, help="The tenant's slug.")
        create.add_argument("--role", required=True, choices=Role.values)
        create.add_argument("--expires-days", type=int, default=None)
        revoke = sub.add_parser("revoke", help="Revoke a key by its prefix (arb_<prefix>_...).")
        revoke.add_argument("prefix")
        listing = sub.add_parser("list", help="List keys (never the secret).")
        listing.add_argument("--tenant", default=None)

    def handle(self, *args, **options):
        try:
            getattr(self, f"_{options['action']}")(options)
        except DomainError as exc:
            raise CommandError(exc.message) from None

    def _create(self, options):
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant with the slug {options['tenant']!r}.")
        expires_at = None
        if options["expires_days"] is not None:
            if options["expires_days"] < 1:
                raise CommandError("--expires-days must be at least 1.")
            expires_at = timezone.now() + timedelta(days=options["expires_days"])
        api_key, key = api_key_create(tenant=tenant, name=options["name"], role=options["role"],
                                      expires_at=expires_at)
        self.stdout.write(f"Created API key {api_key.name!r} for {tenant.slug} with role {options['role']}.")
        self.stdout.write("Store it now; it is not shown again:")
        self.stdout.write(key)

    def _revoke(self, options):
        prefix = options["prefix"].removeprefix("arb_").split("_", 1)[0]
        api_key = ApiKey.objects.filter(prefix=prefix).first()
        if api_key is None:
            raise CommandError(f"No API key with the prefix {prefix!r}.")
        api_key_revoke(api_key=api_key)
        self.stdout.write(f"Revoked {api_key}.")

    def _list(self, options):
        keys = ApiKey.objects.select_related("tenant", "user").order_by("tenant__slug", "name")
        if options["tenant"]:
            keys = keys.filter(tenant__slug=options["tenant"])
        for key in keys:
            state = "revoked" if key.revoked_at else ("expired" if not key.is_usable(timezone.now()) else "active")
            self.stdout.write(f"arb_{key.prefix}_…  {key.tenant.slug}  {key.user.role}  {state}  {key.name}  "
                              f"last used {key.last_used_at or 'never'}")
