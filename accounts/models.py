from django.contrib.auth.models import AbstractUser
from django.db import models


class Tenant(models.Model):
    """An organisation. Every domain row belongs to exactly one tenant."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=60, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    ANALYST = "analyst", "Analyst"
    SUPERVISOR = "supervisor", "Supervisor"
    AUDITOR = "auditor", "Auditor"
    ADMIN = "admin", "Admin"


class Density(models.TextChoices):
    """How tightly the browser UI sets its lists: a person's own choice (accounts.services.user_density_set)."""

    COMPACT = "compact", "Compact"
    COMFORTABLE = "comfortable", "Comfortable"


class User(AbstractUser):
    """A person. Belongs to one tenant with one role. Agents are never users."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, null=True, blank=True, related_name="users")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ANALYST)
    # The identity behind an API key (accounts.ApiKey): it has no password and cannot log in; its
    # role limits what the key may do, and four eyes tells it apart from every person.
    is_service_account = models.BooleanField(default=False)
    # The lists' density this person chose; read with the user on every request (no query of its own).
    ui_density = models.CharField(max_length=12, choices=Density.choices, default=Density.COMPACT,
                                  db_default=Density.COMPACT)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(tenant__isnull=False) | models.Q(is_superuser=True),
                name="user_has_tenant_unless_superuser",
            )
        ]

    @property
    def is_supervisor(self) -> bool:
        return self.role == Role.SUPERVISOR

    @property
    def is_auditor(self) -> bool:
        return self.role == Role.AUDITOR

    @property
    def can_see_audit(self) -> bool:
        return self.role in {Role.AUDITOR, Role.SUPERVISOR, Role.ADMIN}

    @property
    def can_see_dashboard(self) -> bool:
        """The supervisor's dashboard (cases.policy.CAN_SEE_DASHBOARD, the same roles)."""
        return self.role in {Role.SUPERVISOR, Role.AUDITOR, Role.ADMIN}


class ApiKey(models.Model):
    """A machine credential for an integration (`Authorization: Bearer arb_<prefix>_<secret>`).

    Bound to a tenant and to its own service-account User, whose role limits what the key may do.
    Only the sha256 of the key is stored: the secret has 256 bits of entropy, so a fast hash is as
    safe as a slow one and keeps every request's check cheap. The prefix finds the row."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="api_keys")
    user = models.OneToOneField(User, on_delete=models.PROTECT, related_name="api_key")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(User, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} (arb_{self.prefix}_…)"

    @property
    def role(self) -> str:
        return self.user.role

    def is_usable(self, now) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now) and self.user.is_active
