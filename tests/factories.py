import factory

from accounts.models import Role, Tenant, User
from cases import services
from core.actors import Actor


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Tenant {n}")
    slug = factory.Sequence(lambda n: f"tenant-{n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    tenant = factory.SubFactory(TenantFactory)
    role = Role.ANALYST
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()


def make_case(*, actor, tenant=None, title="Billing dispute on a closed account", narrative=None, **fields):
    """A case opened through the service (so it has its created event, audit event and evidence)."""
    user = actor.user if isinstance(actor, Actor) else actor
    tenant = tenant or user.tenant
    fields.setdefault("product", "Credit card")
    fields.setdefault("issue", "Problem with a purchase shown on your statement")
    fields.setdefault("company", "Example Bank, N.A.")
    fields.setdefault("complainant_email", "consumer@example.org")
    if narrative is None:
        narrative = ("I was charged {$1200.00} twice for the same purchase. I called XXXX times and the bank "
                     "refused to refund me.")
    return services.case_create(actor=actor, tenant=tenant, title=title, narrative=narrative, **fields)
