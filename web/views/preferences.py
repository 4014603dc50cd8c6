"""A person's display preferences: the lists' density (compact or comfortable), remembered on
their account (accounts.services.user_density_set) and applied as a class on <body>."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.services import user_density_set
from core.errors import DomainError
from web.access import member_required


@require_POST
@member_required
def density_set(request):
    back = request.POST.get("next") or ""
    back = back if back.startswith("/") and not back.startswith("//") else reverse("web:case_list")
    try:
        user_density_set(user=request.user, density=request.POST.get("density", ""))
    except DomainError as error:
        messages.error(request, error.message)
    return redirect(back)
