"""Forking a conversation run is refused up front with the reason, through the service, the API
and the page — it used to be accepted (202) and then crash in the worker."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from conversations import services as conversation_services
from core.errors import NotAllowed
from runs import services
from runs.models import AgentRun, Checkpoint, Step
from tests.conversations.conftest import post_and_answer
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db

REASON = "conversation runs cannot be forked. Post the question again in the thread to get a new answer."


@pytest.fixture
def chat_run(analyst, case):
    thread = conversation_services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Refund")
    _question, _reply, run = post_and_answer(thread, analyst, "What is the status of this case?")
    assert run.thread_id == thread.pk and Step.objects.filter(run=run).exists()
    return run


def _rows():
    return {"runs": AgentRun.objects.count(), "steps": Step.objects.count(), "checkpoints": Checkpoint.objects.count()}


def test_the_service_refuses_to_fork_a_chat_run_and_changes_nothing(chat_run, analyst, case):
    with assert_nothing_changed(case, extra={"rows": _rows}), pytest.raises(NotAllowed) as refused:
        services.run_fork(actor=analyst, run=chat_run, from_sequence=0)
    assert str(refused.value.message).endswith(REASON)
    assert f"Run R{chat_run.pk} is a chat run of thread {chat_run.thread_id}" in refused.value.message


def test_the_api_answers_409_with_the_reason_instead_of_202(chat_run, analyst, case):
    client = APIClient()
    client.force_authenticate(analyst)
    with assert_nothing_changed(case, extra={"rows": _rows}):
        response = client.post(f"/api/v1/runs/{chat_run.pk}/fork/", {"from_step": 0}, format="json")
    assert response.status_code == 409, response.content
    assert response.json()["detail"].endswith(REASON)


def test_the_run_page_shows_the_reason(chat_run, analyst, client):
    client.force_login(analyst)
    response = client.post(reverse("web:run_fork", args=[chat_run.pk]), {"from_step": 0})
    assert response.status_code in (200, 409)
    assert "conversation runs cannot be forked" in response.content.decode()
    assert AgentRun.objects.filter(parent_run=chat_run).count() == 0
