"""The global search, from the top bar of every page: the tenant's cases whose reference, title,
company, product, consumer (name or email) or narrative hold every word typed — the queue's search
(cases.selectors.case_list_for_user; on PostgreSQL one lookup in cases.models.CaseWords), most
recently updated first, in keyset pages."""

from __future__ import annotations

from django import forms
from django.shortcuts import render
from django.views.decorators.http import require_GET

from cases import selectors
from core.errors import Invalid
from web.access import member_required
from web.keyset import keyset_page

RESULTS_PER_PAGE = 25


class SearchForm(forms.Form):
    q = forms.CharField(label="Search cases", required=False, max_length=200, strip=True)


@require_GET
@member_required
def search(request):
    form = SearchForm(request.GET)
    words = form.cleaned_data["q"] if form.is_valid() else ""
    status, notes, page = 200 if form.is_valid() else 400, [], None
    if not form.is_valid():
        notes.append("Search for at most 200 characters.")
    if words:
        cases = selectors.case_list_for_user(user=request.user, search=words, sort="updated", descending=True)
        try:
            page = keyset_page(cases, key="sort_key", descending=True, cursor=request.GET.get("after"),
                               before=request.GET.get("before"), size=RESULTS_PER_PAGE)
        except Invalid as error:
            notes.append(error.message)
            status = 400
            page = keyset_page(cases, key="sort_key", descending=True, size=RESULTS_PER_PAGE)
    query = request.GET.copy()
    for key in ("after", "before"):
        query.pop(key, None)
    return render(request, "web/search.html", {"form": form, "words": words, "page": page, "notes": notes,
                                               "query": query.urlencode()}, status=status)
