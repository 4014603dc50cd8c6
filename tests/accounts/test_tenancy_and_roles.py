"""Tenants, roles and actors: every person belongs to one tenant with one role; agents are
actors with a name and a version, never users with permissions."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction
from django_fsm import has_transition_perm

from accounts.models import Role, Tenant, User
from cases import policy
from core.actors import Actor, coerce_actor
from tests.factories import UserFactory


def test_a_person_needs_a_tenant(db):
    with pytest.raises(IntegrityError), transaction.atomic():
        User.objects.create_user("drifter", "drifter@example.com", "pw")
    assert not User.objects.filter(username="drifter").exists()


def test_only_a_superuser_may_have_no_tenant(db):
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    assert root.tenant is None


def test_tenant_slug_is_unique(tenant):
    with pytest.raises(IntegrityError), transaction.atomic():
        Tenant.objects.create(name="Copy", slug=tenant.slug)


@pytest.mark.parametrize(("role", "supervisor", "auditor", "sees_audit"), [
    (Role.ANALYST, False, False, False),
    (Role.SUPERVISOR, True, False, True),
    (Role.AUDITOR, False, True, True),
    (Role.ADMIN, False, False, True),
])
def test_role_properties(role, supervisor, auditor, sees_audit, tenant):
    user = UserFactory(username=f"u-{role}", tenant=tenant, role=role)
    assert (user.is_supervisor, user.is_auditor, user.can_see_audit) == (supervisor, auditor, sees_audit)
    assert (role in policy.CAN_SEE_AUDIT) == sees_audit


def test_only_supervisors_approve():
    assert policy.CAN_APPROVE_PROPOSALS == {Role.SUPERVISOR}
    assert policy.CAN_APPROVE_NOTICES == {Role.SUPERVISOR}


def test_actor_identifiers(analyst):
    person = Actor.for_user(analyst)
    assert (person.kind, person.identifier, person.role, person.is_user, person.is_agent) == (
        "user", f"user:{analyst.pk}", "analyst", True, False)
    agent = Actor.agent("risk_assessor", "1.2")
    assert (agent.kind, agent.identifier, agent.role, agent.is_user, agent.is_agent) == (
        "agent", "agent:risk_assessor@1.2", None, False, True)
    assert agent.user is None
    system = Actor.system("reaper")
    assert (system.identifier, system.is_user, system.is_agent) == ("system:reaper", False, False)
    assert str(system) == "system:reaper"


def test_coerce_actor(analyst):
    assert coerce_actor(analyst) == Actor.for_user(analyst)
    agent = Actor.agent("a", "1")
    assert coerce_actor(agent) is agent
    for bad in (None, "user:1", 3):
        with pytest.raises(TypeError, match="Not an actor"):
            coerce_actor(bad)


def test_fsm_permission_needs_a_person_of_the_same_tenant(case, supervisor, outsider, analyst, auditor):
    """The transitions' own permission= check (the services call has_transition_perm with it)."""
    assert has_transition_perm(case.triage, supervisor)
    assert has_transition_perm(case.triage, analyst)
    assert not has_transition_perm(case.triage, auditor)
    assert not has_transition_perm(case.triage, outsider)  # a supervisor, but of another tenant
    assert not has_transition_perm(case.triage, AnonymousUser())
    assert not has_transition_perm(case.triage, None)


def test_policy_matrix_names_only_real_transitions_and_roles():
    from cases.models import CASE_TRANSITIONS

    assert set(policy.TRANSITION_ROLES) == set(CASE_TRANSITIONS)
    assert set().union(*policy.TRANSITION_ROLES.values()) <= set(Role.values)
    assert policy.TRANSITIONS_REQUIRING_REASON <= set(CASE_TRANSITIONS)
