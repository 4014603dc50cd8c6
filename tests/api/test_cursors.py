"""Every malformed cursor on every list is a 400 in the one error shape — never a 500 — and a
cursor the server gave keeps working."""

import base64
from urllib.parse import parse_qs, urlparse

import pytest

from tests.api.conftest import assert_error
from tests.factories import make_case

pytestmark = pytest.mark.django_db

# Each list with the kind of value its (default or chosen) ordering key holds.
LISTS = {"/api/v1/cases/": "date", "/api/v1/cases/?ordering=updated_at": "date", "/api/v1/proposals/": "date",
         "/api/v1/notices/": "date", "/api/v1/audit-events/": "id", "/api/v1/audit-events/?ordering=id": "id",
         "/api/v1/runs/": "id", "/api/v1/runs/?ordering=updated_at": "date", "/api/v1/threads/": "date",
         "/api/v1/memory/": "date", "/api/v1/webhooks/": "date"}


def _cursor(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


MALFORMED = {
    "not base64": "%%%not-a-cursor",
    "a value of the wrong type": _cursor("p=2026-11-27 02:11:17+00:00"),
    "a word": _cursor("p=yesterday"),
    "a number too large": _cursor("p=99999999999999999999999999"),
    "a date without a time zone": _cursor("p=2026-11-27 02:11:17"),
    "a NUL": _cursor("p=1\x00"),
    "a negative offset": _cursor("o=-1"),
    "an offset that is no number": _cursor("o=x"),
    "a reverse flag that is no number": _cursor("r=yes"),
}


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_cursor_is_a_400_naming_the_cursor(api, supervisor, case, path, name):
    cursor = MALFORMED[name]
    if name == "a value of the wrong type" and LISTS[path] == "date":
        cursor = _cursor("p=12")  # on a list ordered by a date, a number is the wrong type
    separator = "&" if "?" in path else "?"
    response = api(supervisor).get(f"{path}{separator}cursor={cursor}")
    assert_error(response, 400, "invalid", fields={"cursor"})


def test_the_reported_cursor_on_audit_events_is_a_400(api, supervisor, case):
    response = api(supervisor).get(f"/api/v1/audit-events/?cursor={_cursor('p=2026-11-27 02:11:17+00:00')}")
    assert_error(response, 400, "invalid", fields={"cursor"})


@pytest.mark.parametrize("ordering", ["-created_at", "updated_at"])
def test_the_cursors_the_server_gives_walk_every_case_once(api, supervisor, analyst, ordering):
    references = {make_case(actor=analyst).reference for _ in range(5)}
    client, seen, url = api(supervisor), [], f"/api/v1/cases/?page_size=2&ordering={ordering}"
    while url:
        body = client.get(url).json()
        seen += [item["reference"] for item in body["results"]]
        url = body["next"]
        if url:
            cursor = parse_qs(urlparse(url).query)["cursor"][0]
            url = f"/api/v1/cases/?page_size=2&ordering={ordering}&cursor={cursor}"
    assert len(seen) == len(set(seen)) and references <= set(seen)
