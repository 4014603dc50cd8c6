"""Reads of people, scoped to a tenant like every selector."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet

from accounts.models import User


def user_list_for_tenant(*, tenant_id: int, active_only: bool = True) -> QuerySet[User]:
    qs = User.objects.filter(tenant_id=tenant_id)
    if active_only:
        qs = qs.filter(is_active=True)
    return qs.order_by("username")


def usernames_for_tenant(*, tenant_id: int, user_ids: Iterable[int]) -> dict[int, str]:
    """{pk: username} for those of `user_ids` that belong to the tenant (others are left out)."""
    return dict(User.objects.filter(tenant_id=tenant_id, pk__in=set(user_ids)).values_list("pk", "username"))
