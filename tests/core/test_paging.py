"""Paging that never skips or repeats (core.paging): keyset cursors on (key, id) for immutable
keys, snapshot-bound cursors for updated_at; every malformed cursor a 400.

"Skipped" and "repeated" are defined on the rows that existed when the walk began (the
snapshot's rows for updated_at; for an immutable key, every row then, since none can move across
the cursor): each must be listed exactly once, whatever is updated during the walk."""

from __future__ import annotations

import queue
import threading
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.cache import cache
from django.db import connection
from rest_framework.test import APIClient

from cases import services
from tests.api.conftest import assert_error
from tests.factories import make_case

ORDERINGS = ["-created_at", "created_at", "updated_at", "-updated_at"]


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _cursor_of(link: str) -> str:
    return parse_qs(urlparse(link).query)["cursor"][0]


def walk(client, ordering: str, *, page_size: int, between_pages=None, backwards_check: bool = False) -> list[str]:
    """Every reference the list gives, following `next` links; `between_pages()` runs after each page."""
    seen, url = [], f"/api/v1/cases/?page_size={page_size}&ordering={ordering}"
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        seen += [item["reference"] for item in body["results"]]
        url = body["next"] and f"/api/v1/cases/?page_size={page_size}&ordering={ordering}&cursor={_cursor_of(body['next'])}"
        if between_pages is not None:
            between_pages()
    return seen


@pytest.mark.django_db
@pytest.mark.parametrize("ordering", ORDERINGS)
def test_updates_between_pages_neither_skip_nor_repeat(analyst, ordering):
    cases = [make_case(actor=analyst, title=f"case {index}") for index in range(9)]
    expected = {case.reference for case in cases}
    client, updated = _client(analyst), iter(cases)

    def touch_one():  # the row most likely to move across the cursor: each case in turn
        case = next(updated, None)
        if case is not None:
            services.evidence_add(actor=analyst, case=case, title="More", text="A later letter.")

    seen = walk(client, ordering, page_size=2, between_pages=touch_one)
    assert len(seen) == len(set(seen)) and set(seen) == expected


@pytest.mark.django_db
@pytest.mark.parametrize("ordering", ORDERINGS)
def test_previous_links_walk_back_over_the_same_pages(analyst, ordering):
    for index in range(5):
        make_case(actor=analyst, title=f"case {index}")
    client = _client(analyst)
    first = client.get(f"/api/v1/cases/?page_size=2&ordering={ordering}").json()
    second = client.get(first["next"]).json()
    assert first["previous"] is None and second["previous"]
    back = client.get(second["previous"]).json()
    assert [c["reference"] for c in back["results"]] == [c["reference"] for c in first["results"]]


@pytest.mark.django_db
def test_a_snapshot_cursor_is_bound_to_its_list_and_expires(analyst, supervisor):
    for index in range(3):
        make_case(actor=analyst, title=f"case {index}")
    first = _client(analyst).get("/api/v1/cases/?page_size=2&ordering=updated_at").json()
    cursor = _cursor_of(first["next"])
    # Another credential, another list (a filter added), another ordering cannot continue from it: 410.
    for path in (f"/api/v1/cases/?page_size=2&ordering=updated_at&cursor={cursor}",
                 f"/api/v1/cases/?ordering=updated_at&status=new&cursor={cursor}",
                 f"/api/v1/cases/?ordering=-created_at&cursor={cursor}"):
        client = _client(supervisor if "page_size" in path else analyst)
        assert_error(client.get(path), 410, "cursor_expired")
    assert _client(analyst).get(f"/api/v1/cases/?page_size=2&ordering=updated_at&cursor={cursor}").status_code == 200
    cache.clear()  # the snapshot expired
    body = assert_error(_client(analyst).get(f"/api/v1/cases/?ordering=updated_at&cursor={cursor}"), 410,
                        "cursor_expired")
    assert "first page" in body["detail"]


@pytest.mark.django_db
def test_a_list_larger_than_the_snapshot_limit_says_how_to_narrow_it(analyst, settings):
    settings.ARBITER_API_SNAPSHOT_MAX_ROWS = 2
    for index in range(3):
        make_case(actor=analyst, title=f"case {index}")
    assert_error(_client(analyst).get("/api/v1/cases/?ordering=updated_at"), 400, "invalid", fields={"ordering"})
    assert _client(analyst).get("/api/v1/cases/?ordering=-created_at").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("cursor", [
    "n.1.1.1", "x.1.1", "n.1", "n..1", "n.1.-1", "n.1." + "9" * 19, "n.2026-11-27T02:11:17.1",
    "s." + "0" * 31 + ".0", "s." + "g" * 32 + ".0", "s." + "0" * 32 + ".x", "s." + "0" * 32 + "." + "9" * 10,
    "bj0xJmk9MSZkPW4=", "", "n.1.1\x00", "n.１.1"])
def test_text_that_is_not_a_cursor_is_a_400(analyst, cursor):
    make_case(actor=analyst)
    for ordering in ("-created_at", "updated_at"):
        response = _client(analyst).get("/api/v1/cases/", {"ordering": ordering, "cursor": cursor})
        assert_error(response, 400, "invalid", fields={"cursor"})


@pytest.mark.django_db
@pytest.mark.parametrize("cursor", ["n.-999999999999999999.1", "p.999999999999999999.999999999999999999",
                                    "n.0.0", "p.-1.5"])
def test_any_position_is_a_page_however_far(analyst, cursor):
    make_case(actor=analyst)
    response = _client(analyst).get("/api/v1/cases/", {"ordering": "-created_at", "cursor": cursor})
    assert response.status_code == 200 and set(response.json()) == {"next", "previous", "results"}


# --- the walk during 100 concurrent updates (PostgreSQL, real threads) -------------------------------

@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("ordering", ORDERINGS)
def test_a_cursor_walk_during_100_concurrent_updates_skips_and_repeats_nothing(analyst, ordering):
    cases = [make_case(actor=analyst, title=f"case {index}") for index in range(40)]
    expected = {case.reference for case in cases}
    tickets: queue.Queue = queue.Queue()
    done, errors = [], []

    def updater(worker: int):
        try:
            while (index := tickets.get()) is not None:
                case = cases[index % len(cases)]
                services.evidence_add(actor=analyst, case=case, title=f"Letter {index}", text="More.")
                done.append(index)
        except Exception as exc:  # the assertion below names it
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=updater, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    issued = iter(range(100))

    def release_updates():  # 100 updates in all, spread over the walk's pages, not awaited
        for _ in range(13):
            index = next(issued, None)
            if index is not None:
                tickets.put((index * 7) % 100)  # spread over every case, in no list order

    try:
        seen = walk(_client(analyst), ordering, page_size=3, between_pages=release_updates)
        during = len(done)
    finally:
        for index in issued:
            tickets.put(index)
        for _ in threads:
            tickets.put(None)
        for thread in threads:
            thread.join(timeout=120)
    assert not errors and len(done) == 100
    assert during > 0, "no update landed during the walk"
    skipped, repeated = expected - set(seen), len(seen) - len(set(seen))
    assert (len(skipped), repeated) == (0, 0), (ordering, skipped, repeated)
