"""/api/v1/threads/ (list, create, detail, messages, compact) and /api/v1/messages/<id>/redact/:
every endpoint, its refusals (asserting nothing changed) and tenant isolation."""

import pytest

from cases.models import Proposal
from conversations import services
from conversations.models import Message, MessageRedaction, Thread, ThreadSummary
from runs.models import AgentRun, MemoryRecord
from tests.api.conftest import assert_error
from tests.conversations.conftest import drive, fill_thread
from tests.factories import make_case
from tests.helpers import assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    """Steps the code enqueues (after commit); nothing reaches a broker. Tests drive runs themselves."""
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


@pytest.fixture
def thread(analyst, case):
    return services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Refund dispute")


def rows() -> dict:
    return {"threads": lambda: Thread.objects.count(), "messages": lambda: Message.objects.count(),
            "redactions": lambda: MessageRedaction.objects.count(), "runs": lambda: AgentRun.objects.count(),
            "summaries": lambda: ThreadSummary.objects.count(), "memory": lambda: MemoryRecord.objects.count()}


# --- threads ---------------------------------------------------------------------------------

def test_threads_are_listed_and_filtered_by_case(api, analyst, case, thread):
    other = make_case(actor=analyst, title="Another complaint")
    services.thread_create(actor=analyst, tenant=analyst.tenant, case=other, title="Other")
    services.thread_create(actor=analyst, tenant=analyst.tenant, title="General question")
    client = api(analyst)
    body = client.get("/api/v1/threads/").json()
    assert len(body["results"]) == 3 and body["results"][0]["title"] == "General question"
    filtered = client.get(f"/api/v1/threads/?case={case.reference}").json()["results"]
    assert [(t["id"], t["case"], t["created_by"]["username"]) for t in filtered] == [(thread.pk, case.reference, "analyst")]


def test_opening_a_thread_about_a_case(api, analyst, case):
    response = api(analyst).post("/api/v1/threads/", {"title": "Escrow question", "case": case.reference},
                                 format="json")
    assert response.status_code == 201
    body = response.json()
    thread = Thread.objects.get()
    assert (body["id"], body["case"], body["message_count"], body["pending_replies"], body["latest_summary"]) == (
        thread.pk, case.reference, 0, [], None)


def test_opening_a_thread_without_a_case(api, analyst):
    body = api(analyst).post("/api/v1/threads/", {"title": "General"}, format="json").json()
    assert body["case"] is None and Thread.objects.get().case_id is None


@pytest.mark.parametrize("data,fields", [({}, {"title"}), ({"title": "  "}, {"title"}),
                                         ({"title": "x", "token_budget": 10}, {"token_budget"})])
def test_opening_a_thread_with_bad_input_is_invalid_and_changes_nothing(api, analyst, data, fields):
    with assert_nothing_changed(extra=rows()):
        response = api(analyst).post("/api/v1/threads/", data, format="json")
    assert_error(response, 400, "invalid", fields=fields)


def test_opening_a_thread_on_no_case_of_yours_is_a_404_and_changes_nothing(api, analyst):
    with assert_nothing_changed(extra=rows()):
        response = api(analyst).post("/api/v1/threads/", {"title": "x", "case": "CASE-1999-000001"}, format="json")
    assert "no case" in assert_error(response, 404, "not_found", fields={"case"})["fields"]["case"][0]


def test_an_auditor_cannot_open_a_thread_and_nothing_changes(api, auditor):
    with assert_nothing_changed(extra=rows()):
        response = api(auditor).post("/api/v1/threads/", {"title": "Just looking"}, format="json")
    assert "cannot open conversation threads" in assert_error(response, 403, "forbidden")["detail"]


def test_threads_are_tenant_scoped(api, outsider, analyst, thread):
    question = services.message_post(actor=analyst, thread=thread, content="Hello")
    client = api(outsider)
    assert len(client.get("/api/v1/threads/").json()["results"]) == 0
    with assert_nothing_changed(thread.case, extra=rows()):
        assert_error(client.get(f"/api/v1/threads/{thread.pk}/"), 404, "not_found")
        assert_error(client.get(f"/api/v1/threads/{thread.pk}/messages/"), 404, "not_found")
        assert_error(client.post(f"/api/v1/threads/{thread.pk}/messages/", {"content": "Hi"}, format="json"),
                     404, "not_found")
        assert_error(client.post(f"/api/v1/threads/{thread.pk}/compact/", {}, format="json"), 404, "not_found")
        assert_error(client.post(f"/api/v1/messages/{question.pk}/redact/", {"reason": "x"}, format="json"),
                     404, "not_found")
        # Opening a thread about their case reference finds no such case in the outsider's tenant.
        response = client.post("/api/v1/threads/", {"title": "x", "case": thread.case.reference}, format="json")
        assert_error(response, 404, "not_found", fields={"case"})


# --- messages ----------------------------------------------------------------------------------

def test_posting_answers_202_with_the_run_that_writes_the_reply(api, analyst, thread,
                                                                 django_capture_on_commit_callbacks, enqueued):
    with django_capture_on_commit_callbacks(execute=True):
        response = api(analyst).post(f"/api/v1/threads/{thread.pk}/messages/",
                                     {"content": "What does the consumer ask for?"}, format="json")
    assert response.status_code == 202
    body = response.json()
    question = Message.objects.get()
    run = AgentRun.objects.get()
    assert body["message"]["id"] == question.pk and body["message"]["reply_run_id"] == run.pk
    assert body["reply_run"] == {"id": run.pk, "status": "queued", "queue_position": 1}
    assert enqueued == [run.pk]
    detail = api(analyst).get(f"/api/v1/threads/{thread.pk}/").json()
    assert detail["pending_replies"] == [{"message_id": question.pk, "sequence": 1, "run_id": run.pk,
                                          "run_status": "queued"}]
    assert [r["id"] for r in api(analyst).get(f"/api/v1/runs/?thread={thread.pk}").json()["results"]] == [run.pk]
    drive(run.pk)
    assert api(analyst).get(f"/api/v1/threads/{thread.pk}/").json()["pending_replies"] == []


@pytest.mark.parametrize("data,fields", [({}, {"content"}), ({"content": "   "}, {"content"})])
def test_posting_nothing_is_invalid_and_changes_nothing(api, analyst, thread, data, fields):
    with assert_nothing_changed(thread.case, extra=rows()):
        response = api(analyst).post(f"/api/v1/threads/{thread.pk}/messages/", data, format="json")
    assert_error(response, 400, "invalid", fields=fields)


def test_an_auditor_cannot_post_and_nothing_changes(api, auditor, thread):
    with assert_nothing_changed(thread.case, extra=rows()):
        response = api(auditor).post(f"/api/v1/threads/{thread.pk}/messages/", {"content": "Hi"}, format="json")
    assert "cannot post in conversation threads" in assert_error(response, 403, "forbidden")["detail"]


def test_messages_are_listed_in_order_with_what_answers_cited_and_created(api, analyst, supervisor, case, thread):
    bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    question = services.message_post(actor=analyst, thread=thread, content="please close the case")
    run = drive(int(question.reply_run_id))
    proposal = Proposal.objects.get(run_id=str(run.pk))
    case.refresh_from_db()
    body = api(analyst).get(f"/api/v1/threads/{thread.pk}/messages/").json()
    assert len(body["results"]) == 2
    asked, answer = body["results"]
    assert (asked["sequence"], asked["role"], asked["content"], asked["reply_run_id"]) == (
        1, "user", "please close the case", run.pk)
    assert (answer["sequence"], answer["role"], answer["in_reply_to"], answer["run_id"]) == (
        2, "assistant", question.pk, run.pk)
    assert answer["cited"]["case_status"] == "decided" and answer["cited"]["case_version"] == case.version
    assert answer["proposal_ids"] == [proposal.pk] and "approval by a supervisor" in answer["content"]
    after = api(analyst).get(f"/api/v1/threads/{thread.pk}/messages/?after=1").json()
    assert [m["sequence"] for m in after["results"]] == [2]


def test_message_lists_are_paginated(api, analyst, thread):
    fill_thread(thread, 120, author=analyst)
    client = api(analyst)
    body = client.get(f"/api/v1/threads/{thread.pk}/messages/").json()
    assert len(body["results"]) == 50 and body["next"] and body["previous"] is None
    page2 = client.get(body["next"]).json()
    page3 = client.get(page2["next"]).json()
    assert [m["sequence"] for m in page3["results"]] == list(range(101, 121)) and page3["next"] is None


# --- redaction ---------------------------------------------------------------------------------

def test_the_author_redacts_a_message_and_it_reads_redacted(api, analyst, thread):
    question = services.message_post(actor=analyst, thread=thread, content="My card is 4111 1111 1111 1111")
    response = api(analyst).post(f"/api/v1/messages/{question.pk}/redact/", {"reason": "Card number"},
                                 format="json")
    assert response.status_code == 200
    body = response.json()
    assert (body["content"], body["is_redacted"], body["metadata"]) == ("[redacted]", True, {})
    assert body["redaction"]["reason"] == "Card number" and body["redaction"]["redacted_by"] == f"user:{analyst.pk}"
    listed = api(analyst).get(f"/api/v1/threads/{thread.pk}/messages/").json()["results"][0]
    assert listed["content"] == "[redacted]" and "4111" not in str(listed)


def test_another_analyst_cannot_redact_and_nothing_changes(api, analyst, analyst_b, supervisor, thread):
    question = services.message_post(actor=analyst, thread=thread, content="Sensitive")
    with assert_nothing_changed(thread.case, extra=rows()):
        response = api(analyst_b).post(f"/api/v1/messages/{question.pk}/redact/", {"reason": "x"}, format="json")
    assert "redact only your own messages" in assert_error(response, 403, "forbidden")["detail"]
    assert api(supervisor).post(f"/api/v1/messages/{question.pk}/redact/", {"reason": "Personal data"},
                                format="json").status_code == 200


def test_redacting_without_a_reason_or_twice_is_refused_and_nothing_changes(api, analyst, thread):
    question = services.message_post(actor=analyst, thread=thread, content="Oops")
    url = f"/api/v1/messages/{question.pk}/redact/"
    with assert_nothing_changed(thread.case, extra=rows()):
        assert_error(api(analyst).post(url, {}, format="json"), 400, "invalid", fields={"reason"})
    services.message_redact(actor=analyst, message=question, reason="Typo")
    with assert_nothing_changed(thread.case, extra=rows()):
        assert_error(api(analyst).post(url, {"reason": "Again"}, format="json"), 409, "conflict")


# --- compaction --------------------------------------------------------------------------------

def test_compacting_starts_a_summary_run_and_the_thread_shows_its_summary(api, analyst, thread):
    fill_thread(thread, 20, author=analyst)
    response = api(analyst).post(f"/api/v1/threads/{thread.pk}/compact/", {}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert (body["graph"], body["thread"], body["status"]) == ("thread_compaction", thread.pk, "queued")
    assert body["input"]["from_sequence"] == 1 and body["input"]["to_sequence"] == 14
    drive(body["id"])
    summary = api(analyst).get(f"/api/v1/threads/{thread.pk}/").json()["latest_summary"]
    assert (summary["from_sequence"], summary["to_sequence"], summary["run_id"]) == (1, 14, body["id"])
    # The originals stay: all 20 messages are still listed.
    assert len(api(analyst).get(f"/api/v1/threads/{thread.pk}/messages/").json()["results"]) == 20


def test_compacting_a_short_thread_is_refused_and_nothing_changes(api, analyst, thread):
    fill_thread(thread, 3, author=analyst)
    with assert_nothing_changed(thread.case, extra=rows()):
        response = api(analyst).post(f"/api/v1/threads/{thread.pk}/compact/", {}, format="json")
    assert "Nothing to compact" in assert_error(response, 409, "not_allowed")["detail"]


def test_an_auditor_cannot_compact_and_nothing_changes(api, auditor, analyst, thread):
    fill_thread(thread, 20, author=analyst)
    with assert_nothing_changed(thread.case, extra=rows()):
        response = api(auditor).post(f"/api/v1/threads/{thread.pk}/compact/", {}, format="json")
    assert_error(response, 403, "forbidden")
