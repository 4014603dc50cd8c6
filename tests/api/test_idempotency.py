"""Idempotency-Key on every unsafe endpoint: replay, 422 on another body, per credential, expiry,
and one effect for concurrent identical requests (PostgreSQL, threads)."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from cases.models import Case, Evidence, Proposal
from conversations.models import Message
from integrations.models import IdempotencyRecord
from runs.models import AgentRun
from tests.api.conftest import assert_error
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


def test_same_key_same_body_replays_the_stored_response(api, analyst):
    client = api(analyst)
    first = client.post("/api/v1/cases/", {"title": "Lost payment"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    with assert_nothing_changed():
        again = client.post("/api/v1/cases/", {"title": "Lost payment"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json() and again["Location"] == first["Location"]
    assert Case.objects.count() == 1


def test_same_key_other_body_is_422_and_changes_nothing(api, analyst):
    client = api(analyst)
    client.post("/api/v1/cases/", {"title": "A"}, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    with assert_nothing_changed():
        response = client.post("/api/v1/cases/", {"title": "B"}, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert_error(response, 422, "idempotency_key_reused")


def test_keys_are_per_credential(api, analyst, analyst_b, make_key, bearer):
    api(analyst).post("/api/v1/cases/", {"title": "A"}, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    response = api(analyst_b).post("/api/v1/cases/", {"title": "A"}, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    _, key = make_key("analyst")
    response = bearer(key).post("/api/v1/cases/", {"title": "A"}, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert Case.objects.count() == 3
    assert IdempotencyRecord.objects.filter(key="shared").count() == 3


def test_an_expired_key_is_a_new_request(api, analyst):
    client = api(analyst)
    client.post("/api/v1/cases/", {"title": "A"}, format="json", HTTP_IDEMPOTENCY_KEY="old")
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = client.post("/api/v1/cases/", {"title": "B"}, format="json", HTTP_IDEMPOTENCY_KEY="old")
    assert response.status_code == 201 and Case.objects.count() == 2
    from integrations.idempotency import idempotency_purge_expired

    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert idempotency_purge_expired() == 1


def test_refusals_are_replayed_too_and_server_errors_are_not_stored(api, analyst, case):
    client = api(analyst)
    first = client.post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "decide"}, format="json",
                        HTTP_IDEMPOTENCY_KEY="t-1")
    assert first.status_code in (403, 409)
    again = client.post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "decide"}, format="json",
                        HTTP_IDEMPOTENCY_KEY="t-1")
    assert again.status_code == first.status_code and again["Idempotent-Replayed"] == "true"


def test_a_bad_idempotency_key_header_is_a_field_error(api, analyst):
    with assert_nothing_changed():
        response = api(analyst).post("/api/v1/cases/", {"title": "A"}, format="json",
                                     HTTP_IDEMPOTENCY_KEY="x" * 201)
    assert_error(response, 400, "invalid", fields={"Idempotency-Key"})


def test_evidence_runs_messages_and_uploads_honour_the_key(api, analyst, case):
    client = api(analyst)
    for _ in range(2):
        assert client.post(f"/api/v1/cases/{case.reference}/evidence/", {"title": "t", "text": "x"}, format="json",
                           HTTP_IDEMPOTENCY_KEY="ev").status_code == 201
        assert client.post("/api/v1/runs/", {"case": case.reference}, format="json",
                           HTTP_IDEMPOTENCY_KEY="run").status_code == 202
    from django.core.files.uploadedfile import SimpleUploadedFile

    for _ in range(2):
        upload = SimpleUploadedFile("a.txt", b"hello", content_type="text/plain")
        assert client.post(f"/api/v1/cases/{case.reference}/evidence/upload/", {"title": "f", "file": upload},
                           format="multipart", HTTP_IDEMPOTENCY_KEY="up").status_code == 201
    thread = client.post("/api/v1/threads/", {"title": "t"}, format="json").json()
    for _ in range(2):
        assert client.post(f"/api/v1/threads/{thread['id']}/messages/", {"content": "hi"}, format="json",
                           HTTP_IDEMPOTENCY_KEY="msg").status_code == 202
    before = 1  # the case's narrative evidence from make_case
    assert Evidence.objects.filter(case=case).count() == before + 2
    assert AgentRun.objects.filter(graph="case_analysis").count() == 1
    assert Message.objects.filter(role="user").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_requests_have_one_effect(tenant, analyst, case):
    """Eight threads send the same proposal with the same key at once: one proposal is created;
    every other answer is the replay or a 409 'in progress' — never a second proposal."""
    assert connection.vendor == "postgresql"
    key = str(uuid.uuid4())
    barrier = threading.Barrier(8)
    statuses = []

    def send():
        client = APIClient()
        client.force_authenticate(analyst)
        barrier.wait()
        try:
            response = client.post(f"/api/v1/cases/{case.reference}/proposals/", {
                "kind": "risk_level", "payload": {"risk_level": "high"}, "rationale": "Same"}, format="json",
                HTTP_IDEMPOTENCY_KEY=key)
            statuses.append((response.status_code, response.get("Idempotent-Replayed")))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(statuses) == 8
    assert Proposal.objects.filter(case=case).count() == 1
    fresh = [s for s in statuses if s == (201, None)]
    assert len(fresh) == 1, statuses
    assert all(s in {(201, "true"), (409, None)} for s in statuses if s != (201, None)), statuses
