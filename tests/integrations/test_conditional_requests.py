"""Conditional requests: a strong ETag on every object GET and list page, 304 on If-None-Match,
and If-Match honoured on every mutation (412 on a mismatch, or where nothing gives an ETag —
and nothing changed)."""

import pytest

from cases import services
from integrations.models import WebhookEndpoint
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


def test_an_object_get_answers_304_to_its_etag(api, analyst, case):
    client = api(analyst)
    response = client.get(f"/api/v1/cases/{case.reference}/")
    etag = response["ETag"]
    assert etag == f'"case-{case.pk}-v{case.version}"'
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        not_modified = client.get(f"/api/v1/cases/{case.reference}/", HTTP_IF_NONE_MATCH=header)
        assert not_modified.status_code == 304 and not_modified.content == b"" and not_modified["ETag"] == etag
    services.case_transition(actor=analyst, case=case, transition="triage")
    changed = client.get(f"/api/v1/cases/{case.reference}/", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag and changed.json()["status"] == "triaged"


def test_a_list_page_has_a_strong_etag_of_its_body_and_answers_304(api, analyst, case):
    client = api(analyst)
    first = client.get("/api/v1/cases/")
    etag = first["ETag"]
    assert etag.startswith('"') and not etag.startswith("W/") and len(etag) == 34
    assert client.get("/api/v1/cases/")["ETag"] == etag  # the same page, the same tag
    not_modified = client.get("/api/v1/cases/", HTTP_IF_NONE_MATCH=etag)
    assert not_modified.status_code == 304 and not_modified.content == b""
    make_case(actor=analyst)
    changed = client.get("/api/v1/cases/", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag and len(changed.json()["results"]) == 2


def test_an_object_without_a_version_gets_a_body_etag(api, supervisor, endpoint):
    client = api(supervisor)
    etag = client.get("/api/v1/me/")["ETag"]
    assert client.get("/api/v1/me/", HTTP_IF_NONE_MATCH=etag).status_code == 304
    assert client.get("/api/v1/me/", HTTP_IF_NONE_MATCH='"something-else"').status_code == 200


def test_an_error_carries_no_etag(api, analyst):
    response = api(analyst).get("/api/v1/cases/NO-SUCH/", HTTP_IF_NONE_MATCH="*")
    assert_error(response, 404, "not_found")
    assert not response.has_header("ETag")


def test_a_webhook_change_with_a_stale_if_match_is_412_and_changes_nothing(api, supervisor, endpoint):
    client = api(supervisor)
    etag = client.get(f"/api/v1/webhooks/{endpoint.pk}/")["ETag"]
    assert etag.startswith(f'"webhook-{endpoint.pk}-')
    client.patch(f"/api/v1/webhooks/{endpoint.pk}/", {"description": "someone else"}, format="json")
    row = lambda: WebhookEndpoint.objects.values().get(pk=endpoint.pk)  # noqa: E731
    with assert_nothing_changed(extra={"endpoint": row}):
        response = client.patch(f"/api/v1/webhooks/{endpoint.pk}/", {"is_active": False}, format="json",
                                HTTP_IF_MATCH=etag)
    assert_error(response, 412, "precondition_failed")
    fresh = client.get(f"/api/v1/webhooks/{endpoint.pk}/")["ETag"]
    response = client.patch(f"/api/v1/webhooks/{endpoint.pk}/", {"is_active": False}, format="json",
                            HTTP_IF_MATCH=fresh)
    assert response.status_code == 200 and response.json()["is_active"] is False and response["ETag"] != fresh


def test_a_weak_tag_never_satisfies_if_match(api, supervisor, case):
    etag = api(supervisor).get(f"/api/v1/cases/{case.reference}/")["ETag"]
    with assert_nothing_changed(case):
        response = api(supervisor).post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "triage"},
                                        format="json", HTTP_IF_MATCH=f"W/{etag}")
    assert_error(response, 412, "precondition_failed")


def test_if_match_on_a_write_to_something_without_an_etag_is_412_and_changes_nothing(api, supervisor, receiver):
    client = api(supervisor)
    body = {"url": receiver.url, "event_types": ["case.changed"]}
    with assert_nothing_changed(extra={"endpoints": lambda: WebhookEndpoint.objects.count()}):
        response = client.post("/api/v1/webhooks/", body, format="json", HTTP_IF_MATCH='"anything"')
    assert_error(response, 412, "precondition_failed")
    response = client.post("/api/v1/webhooks/", body, format="json", HTTP_IF_MATCH="*")
    assert response.status_code == 201
