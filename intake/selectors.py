"""Reads of bulk intake, always scoped to the user's tenant (another tenant's import is a 404)."""

from __future__ import annotations

from django.db.models import QuerySet

from core.errors import NotFound
from intake.models import ComplaintImport


def import_list_for_user(*, user, limit: int = 20) -> QuerySet[ComplaintImport]:
    return ComplaintImport.objects.filter(tenant_id=user.tenant_id).select_related("created_by")[:limit]


def import_get_for_user(*, user, pk: int) -> ComplaintImport:
    found = ComplaintImport.objects.filter(tenant_id=user.tenant_id, pk=pk).select_related("created_by").first()
    if found is None:
        raise NotFound("No such import in your organisation; it may have been started by another organisation.")
    return found
