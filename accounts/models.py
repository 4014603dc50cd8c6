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


class User(AbstractUser):
    """A person. Belongs to one tenant with one role. Agents are never users."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, null=True, blank=True, related_name="users")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ANALYST)

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
