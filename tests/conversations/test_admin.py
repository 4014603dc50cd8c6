"""Conversations in the operations admin: every model renders read-only and tenant-scoped, a
message's content is never shown (only what users see), and the actions go through the services."""

import pytest
from django.contrib import admin, messages
from django.urls import reverse

from accounts.models import Role
from audit.models import AuditEvent
from conversations.models import Message, MessageRedaction, Thread, ThreadSummary
from conversations.services import message_redact, thread_summary_record
from core.actors import Actor
from runs.models import AgentRun
from tests.conversations.conftest import fill_thread
from tests.factories import UserFactory
from tests.helpers import assert_nothing_changed

MODELS = (Thread, Message, ThreadSummary, MessageRedaction)


def _url(model, view, *args):
    return reverse(f"admin:conversations_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def staff_supervisor(supervisor):
    supervisor.is_staff = True
    supervisor.save(update_fields=["is_staff"])
    return supervisor


@pytest.fixture
def world(thread, analyst):
    messages_ = fill_thread(thread, 20, author=analyst)
    secret = Message.objects.get(pk=messages_[0].pk)
    message_redact(actor=analyst, message=secret, reason="PII")
    thread_summary_record(actor=Actor.agent("summarize", "1"), thread=thread, from_sequence=1, to_sequence=10,
                          content="Summary so far.", run_id="1", model_call_id="1")
    return {"thread": thread, "secret": secret}


def test_every_conversations_model_is_registered():
    for model in MODELS:
        assert model in admin.site._registry


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_pages_render_read_only_for_tenant_staff(client, staff_supervisor, world, model):
    client.force_login(staff_supervisor)
    assert client.get(_url(model, "changelist")).status_code == 200
    obj = model.objects.order_by("pk").first()
    assert client.get(_url(model, "change", obj.pk)).status_code == 200
    assert client.get(_url(model, "add")).status_code == 403
    assert client.post(_url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_another_tenants_staff_sees_nothing(client, world, outsider, model):
    outsider.is_staff = True
    outsider.save(update_fields=["is_staff"])
    client.force_login(outsider)
    obj = model.objects.order_by("pk").first()
    assert client.get(_url(model, "change", obj.pk)).status_code in (302, 403, 404)
    response = client.get(_url(model, "changelist"))
    assert response.status_code == 200 and response.context["cl"].result_count == 0


def test_a_redacted_message_shows_the_placeholder_never_the_content(client, staff_supervisor, world):
    client.force_login(staff_supervisor)
    secret = world["secret"]
    for url in (_url(Message, "changelist"), _url(Message, "change", secret.pk)):
        page = client.get(url).content.decode()
        assert secret.content not in page
        assert "[redacted]" in page


def test_redact_action_calls_the_service_with_the_reason(client, staff_supervisor, world):
    client.force_login(staff_supervisor)
    target = Message.objects.get(thread=world["thread"], sequence=2)
    response = client.post(_url(Message, "changelist"), {"action": "redact_messages", "_selected_action": [target.pk],
                                                         "reason": "Account number pasted"}, follow=True)
    assert response.status_code == 200
    redaction = MessageRedaction.objects.get(message=target)
    assert (redaction.reason, redaction.redacted_by) == ("Account number pasted", f"user:{staff_supervisor.pk}")
    assert AuditEvent.objects.filter(action="conversations.message.redacted", target_id=str(target.pk)).exists()


def test_redact_action_without_a_reason_is_an_error_that_changes_nothing(client, staff_supervisor, world):
    client.force_login(staff_supervisor)
    target = Message.objects.get(thread=world["thread"], sequence=2)
    with assert_nothing_changed(extra={"redactions": MessageRedaction.objects.count}):
        response = client.post(_url(Message, "changelist"), {"action": "redact_messages",
                                                             "_selected_action": [target.pk], "reason": ""},
                               follow=True)
    levels = [m.level for m in response.context["messages"]]
    assert messages.ERROR in levels


def test_an_admin_role_without_chat_rights_cannot_compact_from_the_admin(client, tenant, world):
    ops = UserFactory(username="ops", tenant=tenant, role=Role.AUDITOR, is_staff=True)
    client.force_login(ops)
    with assert_nothing_changed(extra={"runs": AgentRun.objects.count}):
        response = client.post(_url(Thread, "changelist"), {"action": "compact_threads",
                                                            "_selected_action": [world["thread"].pk]}, follow=True)
    assert any(m.level == messages.ERROR and "auditor" in m.message for m in response.context["messages"])


def test_compact_action_starts_a_compaction_run(client, staff_supervisor, world):
    client.force_login(staff_supervisor)
    client.post(_url(Thread, "changelist"), {"action": "compact_threads", "_selected_action": [world["thread"].pk]})
    run = AgentRun.objects.get(thread=world["thread"], graph="thread_compaction")
    assert run.started_by == f"user:{staff_supervisor.pk}"
