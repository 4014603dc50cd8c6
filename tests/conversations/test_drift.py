"""Cited-fact drift: an answer citing a case status/version the case no longer has."""

import hashlib

import pytest
from django.core.management import call_command

from cases import services as case_services
from conversations import services
from conversations.drift import cited_fact_drift
from conversations.models import Message
from core.actors import Actor
from tests.conversations.conftest import post_and_answer

CHAT = Actor.agent("chat", "1")


def ask_and_answer(thread, analyst, case, text="Where are we?"):
    sequence = thread.last_sequence + 1
    question = Message.objects.create(
        tenant_id=thread.tenant_id, thread=thread, sequence=sequence, role="user", author_type="user",
        author_id=f"user:{analyst.pk}", author_user=analyst, content=text,
        content_sha256=hashlib.sha256(text.encode()).hexdigest())
    thread.last_sequence = sequence
    thread.save(update_fields=["last_sequence"])
    case.refresh_from_db()
    return services.message_append_assistant(
        actor=CHAT, thread=thread, in_reply_to=question, content=f"The case is {case.status}.", run_id="5",
        cited={"case_status": case.status, "case_version": case.version, "artifact_ids": []})


def test_an_answer_matching_the_case_is_not_drift(thread, analyst, case):
    ask_and_answer(thread, analyst, case)
    assert cited_fact_drift() == []


def test_drift_is_detected_after_the_case_changes(thread, analyst, supervisor, case):
    answer = ask_and_answer(thread, analyst, case)
    case_services.case_transition(actor=supervisor, case=case, transition="triage")
    case.refresh_from_db()
    [finding] = cited_fact_drift()
    assert (finding.message_id, finding.thread_id, finding.case_id) == (answer.pk, thread.pk, case.pk)
    assert (finding.cited_status, finding.cited_version) == ("new", answer.cited_case_version)
    assert (finding.case_status, finding.case_version) == ("triaged", case.version)
    assert "cites" in finding.description and case.reference in finding.description
    assert cited_fact_drift(tenant_id=case.tenant_id) == [finding]
    assert cited_fact_drift(tenant_id=case.tenant_id + 1000) == []
    assert cited_fact_drift(tenant_id=case.tenant_id, thread_id=thread.pk) == [finding]
    assert cited_fact_drift(tenant_id=case.tenant_id, thread_id=thread.pk + 1000) == []


def test_a_version_change_alone_is_drift(thread, analyst, case):
    ask_and_answer(thread, analyst, case)
    case_services.evidence_add(actor=analyst, case=case, title="Statement", text="The statement shows two charges.")
    [finding] = cited_fact_drift()
    assert finding.cited_status == finding.case_status == "new"
    assert finding.case_version == finding.cited_version + 1


def test_only_the_latest_citing_answer_of_a_thread_is_checked(thread, analyst, supervisor, case):
    ask_and_answer(thread, analyst, case)
    case_services.case_transition(actor=supervisor, case=case, transition="triage")
    assert len(cited_fact_drift()) == 1
    ask_and_answer(thread, analyst, case, text="And now?")  # a fresh answer supersedes the old one
    assert cited_fact_drift() == []


def test_drift_report_flags_a_chat_answer_after_the_case_changes(thread, analyst, supervisor, case, capsys):
    _question, reply, _run = post_and_answer(thread, analyst, "What is the status?")
    assert (reply.cited_case_status, reply.cited_case_version) == ("new", case.version)
    call_command("drift_report", "--check", "conversation_cited_facts")
    assert "No drift found" in capsys.readouterr().out

    case_services.case_transition(actor=supervisor, case=case, transition="triage")
    with pytest.raises(SystemExit) as exited:
        call_command("drift_report", "--check", "conversation_cited_facts")
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert f"message:{reply.pk}" in out and f"thread:{thread.pk}" in out and f"case:{case.reference}" in out
    assert "cites" in out and "the case is now triaged" in out
