"""Paging that never skips or repeats, for every ordering every list offers (ADR 0028).

Only an ordering on a key that changes (a field set on every save, `updated_at`) can let a row
move across a cursor. The first test reads every list of the API from the URL configuration and
shows that each ordering it offers is on such a key of the lists walked here under concurrent
updates (cases, notices, runs), or on a key that never changes (the primary key, a creation time
set once, an append-only sequence) — so a list added later with a mutable ordering fails it until
it is walked below. The walk test is tests/core/test_paging.py's for cases, extended to notices
and runs, with each list's own kind of update: 100 updates from 4 threads spread between the
pages, on PostgreSQL."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from django.db import connection, models
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from cases import services as case_services
from cases.models import Notice
from core.api_base import ListApi
from core.paging import is_mutable
from runs import services as run_services
from runs.models import AgentRun
from tests.factories import make_case

# The lists whose orderings include a mutable key: walked during concurrent updates below.
WALKED = {"/api/v1/cases/", "/api/v1/notices/", "/api/v1/runs/"}
# Keys a row gets once and never changes: each model's append-only position in its stream.
APPEND_ONLY_KEYS = {"sequence"}


def _list_views(patterns=None, prefix: str = ""):
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            yield from _list_views(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            view_class = getattr(entry.callback, "view_class", None)
            if isinstance(view_class, type) and issubclass(view_class, ListApi):
                yield "/" + prefix + str(entry.pattern), view_class


def _offered(view_class) -> set[str]:
    names = {field.lstrip("-") for field in view_class.ordering_fields}
    return names if len(view_class.ordering_fields) > 1 else {view_class.ordering_fields[0].lstrip("-")}


def test_every_list_orders_by_a_key_that_never_changes_or_is_walked_under_concurrent_updates():
    lists = list(_list_views())
    assert len(lists) >= 15, [path for path, _ in lists]  # the URL walk found the API's lists
    mutable_lists = set()
    for path, view_class in lists:
        model = view_class.queryset.model
        for name in _offered(view_class):
            field = model._meta.get_field(name)
            if is_mutable(field):
                mutable_lists.add(path)
                continue
            never_changes = (field.primary_key or getattr(field, "auto_now_add", False)
                             or (name in APPEND_ONLY_KEYS and isinstance(field, models.IntegerField)))
            assert never_changes, (path, name, "a key that can change: walk this list under updates below")
    assert mutable_lists == WALKED


# --- the walk during 100 concurrent updates (PostgreSQL, real threads) -------------------------------

@dataclass(frozen=True)
class Walked:
    path: str
    make: Callable  # (analyst) -> the list's rows, made through their services
    touch: Callable  # (analyst, row, index) -> an update that moves the row's updated_at
    key: Callable  # an item of the list's JSON -> what identifies it


def _cases(analyst):
    return [make_case(actor=analyst, title=f"case {index}") for index in range(40)]


def _touch_case(analyst, case, index):
    case_services.evidence_add(actor=analyst, case=case, title=f"Letter {index}", text="More.")


def _notices(analyst):
    cases = [make_case(actor=analyst, title=f"case {index}", complainant_email=f"c{index}@example.org")
             for index in range(8)]
    return [case_services.notice_draft(actor=analyst, case=cases[index % 8], subject=f"Notice {index}",
                                       body="Dear customer, we are looking into it.") for index in range(40)]


def _touch_notice(analyst, notice, index):
    case_services.notice_edit(actor=analyst, notice=Notice.objects.get(pk=notice.pk),
                              body=f"Dear customer, update {index}: we are looking into it.")


def _runs(analyst):
    cases = [make_case(actor=analyst, title=f"case {index}") for index in range(40)]
    return [run_services.run_start(actor=analyst, case=case, enqueue=False) for case in cases]


def _touch_run(analyst, run, index):
    """What every save of a run does to its list key (a worker's step, a cancel, a resume)."""
    AgentRun.objects.get(pk=run.pk).save(update_fields=["updated_at"])


WALKS = {
    "cases": Walked("/api/v1/cases/", _cases, _touch_case, lambda item: item["reference"]),
    "notices": Walked("/api/v1/notices/", _notices, _touch_notice, lambda item: item["id"]),
    "runs": Walked("/api/v1/runs/", _runs, _touch_run, lambda item: item["id"]),
}
ORDERINGS = [(name, ordering) for name, walked in WALKS.items()
             for ordering in sorted({f"{sign}{field}" for field in _offered(dict(_list_views())[walked.path])
                                     for sign in ("", "-")})]


def _walk(client, walked: Walked, ordering: str, *, between_pages) -> list:
    seen, query = [], {"page_size": 3, "ordering": ordering}
    url = f"{walked.path}?{urlencode(query)}"
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        seen += [walked.key(item) for item in body["results"]]
        cursor = body["next"] and parse_qs(urlparse(body["next"]).query)["cursor"][0]
        url = cursor and f"{walked.path}?{urlencode({**query, 'cursor': cursor})}"
        between_pages()
    return seen


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("name", "ordering"), ORDERINGS)
def test_a_walk_of_every_list_during_100_concurrent_updates_skips_and_repeats_nothing(analyst, name, ordering):
    walked = WALKS[name]
    rows = walked.make(analyst)
    client = APIClient()
    client.force_authenticate(analyst)
    expected = set(_walk(client, walked, ordering, between_pages=lambda: None))
    assert len(expected) == len(rows)
    tickets: queue.Queue = queue.Queue()
    done, errors = [], []
    landed = threading.Event()

    def updater():
        try:
            while (index := tickets.get()) is not None:
                walked.touch(analyst, rows[index % len(rows)], index)
                done.append(index)
                landed.set()
        except Exception as exc:  # the assertion below names it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=updater) for _ in range(4)]
    for thread in threads:
        thread.start()
    issued = iter(range(100))

    def release_updates():  # 100 updates in all, spread over the walk's pages, not awaited
        for _ in range(13):
            index = next(issued, None)
            if index is not None:
                tickets.put((index * 7) % 100)  # spread over every row, in no list order
        # The walk goes on to its next page only once an update has landed (a wait of the first page
        # alone): a walk quicker than the updaters' first commit tested nothing — seen once in CI,
        # "no update landed during the walk".
        landed.wait(timeout=60)

    try:
        seen = _walk(client, walked, ordering, between_pages=release_updates)
        during = len(done)
    finally:
        for index in issued:
            tickets.put(index)
        for _ in threads:
            tickets.put(None)
        for thread in threads:
            thread.join(timeout=120)
    assert not errors and len(done) == 100, errors[:3]
    assert during > 0, "no update landed during the walk"
    skipped, repeated = expected - set(seen), len(seen) - len(set(seen))
    assert (len(skipped), repeated) == (0, 0), (name, ordering, skipped, repeated)
