"""The notifications page (web.notifications): what happened to my proposals and notices, unread
after my read mark, each linking to its object; "Mark all read" never loses a newer one."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from cases import services
from conversations import services as chat
from conversations.models import Message
from runs.models import AgentRun
from tests.runs.conftest import drive
from web.models import NotificationsRead

pytestmark = pytest.mark.django_db


def page(client, user):
    client.force_login(user)
    return client.get(reverse("web:notification_list"))


def test_a_decision_on_my_proposal_and_my_notice_is_listed_unread_with_a_link(client, analyst, analyst_b,
                                                                             supervisor, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Large loss.")
    services.proposal_reject(actor=supervisor, proposal=proposal, note="Not shown.")
    notice = services.notice_draft(actor=analyst, case=case, subject="Hello", body="We are looking into it.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    response = page(client, analyst)
    items = response.context["items"]
    assert [n.is_unread for n in items] == [True, True] and response.context["unread"] == 2
    html = response.content.decode()
    assert f'#proposal-{proposal.pk}"' in html and f"Proposal P{proposal.pk}" in html and "was rejected" in html
    assert f'#notice-{notice.pk}"' in html and "was approved by supervisor" in html
    assert page(client, analyst_b).context["items"] == []  # not theirs


def test_mark_all_read_reads_up_to_the_list_shown_only(client, analyst, supervisor, case):
    first = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                     rationale="One.")
    services.proposal_reject(actor=supervisor, proposal=first, note="No.")
    shown_at = page(client, analyst).context["shown_at"]
    second = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                      rationale="Two.")
    services.proposal_reject(actor=supervisor, proposal=second, note="No.")
    response = client.post(reverse("web:notifications_read"), {"shown_at": shown_at})
    assert response.status_code == 302
    items = page(client, analyst).context["items"]
    assert [(n.text.split()[1], n.is_unread) for n in items] == [(f"P{second.pk}", True), (f"P{first.pk}", False)]
    # An older list marked read later does not move the mark back.
    older = (timezone.now() - timedelta(days=1)).isoformat()
    client.post(reverse("web:notifications_read"), {"shown_at": older})
    assert NotificationsRead.objects.get(user=analyst).read_until.isoformat() == shown_at


@pytest.mark.parametrize("value", ["", "yesterday", "2026-01-01T00:00:00", "2999-01-01T00:00:00+00:00"])
def test_a_bad_read_time_is_refused_and_nothing_is_written(client, analyst, value):
    client.force_login(analyst)
    response = client.post(reverse("web:notifications_read"), {"shown_at": value})
    assert response.status_code == 302 and not NotificationsRead.objects.exists()


def test_the_poll_updates_the_bell_count(client, analyst, supervisor, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="One.")
    services.proposal_reject(actor=supervisor, proposal=proposal, note="No.")
    client.force_login(analyst)
    html = client.get(reverse("web:notifications")).content.decode()
    assert '<span id="bell-count" hx-swap-oob="true"><span class="bell-count">1</span>' in html


def test_a_chat_reply_links_to_the_reply_in_its_thread(client, analyst, case, monkeypatch,
                                                       django_capture_on_commit_callbacks):
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)
    thread = chat.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Refund dispute")
    client.force_login(analyst)
    client.get(reverse("web:notifications"))  # the header's poll: its first call starts the clock
    with django_capture_on_commit_callbacks(execute=True):
        question = chat.message_post(actor=analyst, thread=thread, content="What does the consumer ask for?")
    drive(AgentRun.objects.get(pk=int(question.reply_run_id)))
    reply = Message.objects.get(thread=thread, role="assistant")

    items = page(client, analyst).context["items"]

    assert [(n.text, n.url) for n in items] == [(
        "The assistant replied in the thread “Refund dispute”.",
        reverse("web:thread_detail", args=[thread.pk]) + f"#message-{reply.sequence}")]
    # The toast of the header's poll opens the reply too.
    toast = client.get(reverse("web:notifications")).content.decode()
    assert f'href="{reverse("web:thread_detail", args=[thread.pk])}#message-{reply.sequence}">Read the reply</a>' in toast
