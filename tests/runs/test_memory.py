"""Governed memory: agents propose, people confirm; domain facts refused; expired, rejected or
forgotten memory never reaches a model."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from core.actors import Actor
from core.errors import Forbidden, Invalid, NotAllowed, NotFound
from runs import services
from runs.memory import domain_facts_claimed
from runs.models import MemoryRecord, MemoryStatus, ModelCall
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

AGENT = Actor.agent("chat", "1")


def _memories():
    return sorted(MemoryRecord.objects.values_list("pk", "status", "decided_by_id"))


@pytest.mark.parametrize("content", [
    "The case is closed.",
    "CASE-2026-000001 status: under_review",
    "Complaint was moved to ready for decision",
    "Risk level is high for this respondent",
    "This is a critical-risk case",
    "The notice was already sent to the consumer",
    "The notice has been approved by the supervisor",
])
def test_a_memory_claiming_a_domain_fact_is_refused(analyst, tenant, content):
    with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(Invalid) as refused:
        services.memory_propose(actor=AGENT, tenant=tenant, subject=f"user:{analyst.pk}", content=content)
    assert "cannot hold a domain fact" in refused.value.fields["content"][0]


@pytest.mark.parametrize("content", [
    "Prefers short summaries with bullet points.",
    "Always cite the evidence id next to each claim.",
    "Writes notices in plain English; avoid legal jargon.",
])
def test_preferences_are_not_mistaken_for_domain_facts(content):
    assert domain_facts_claimed(content) == {}


def test_an_agent_proposes_and_the_person_confirms(analyst, tenant):
    memory = services.memory_propose(actor=AGENT, tenant=tenant, subject=f"user:{analyst.pk}",
                                     content="Prefers short summaries.", confidence=0.7)
    assert memory.status == MemoryStatus.PROPOSED and memory.proposed_by == "agent:chat@1"
    assert memory.expires_at > timezone.now() + timedelta(days=179)
    confirmed = services.memory_confirm(actor=analyst, memory=memory, note="yes")
    assert confirmed.status == MemoryStatus.ACTIVE and confirmed.decided_by == analyst
    actions = list(AuditEvent.objects.filter(target_type="memory").values_list("action", flat=True))
    assert actions == ["runs.memory.proposed", "runs.memory.confirmed"]


def test_confirmation_refusals_change_nothing(analyst, analyst_b, supervisor, outsider, tenant):
    memory = services.memory_propose(actor=AGENT, tenant=tenant, subject=f"user:{analyst.pk}",
                                     content="Prefers short summaries.")
    for actor, error in ((AGENT, Forbidden), (analyst_b, Forbidden), (outsider, NotFound)):
        with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(error):
            services.memory_confirm(actor=actor, memory=memory)
    services.memory_confirm(actor=supervisor, memory=memory)  # a supervisor may
    with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(NotAllowed):
        services.memory_confirm(actor=analyst, memory=memory)


def test_an_expired_proposal_cannot_be_confirmed(analyst, tenant):
    memory = services.memory_propose(actor=AGENT, tenant=tenant, subject=f"user:{analyst.pk}",
                                     content="Prefers short summaries.",
                                     expires_at=timezone.now() + timedelta(seconds=5))
    MemoryRecord.objects.filter(pk=memory.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(NotAllowed, match="expired"):
        services.memory_confirm(actor=analyst, memory=memory)


def test_propose_refuses_bad_subjects_and_roles(analyst, auditor, tenant, other_tenant):
    with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(Invalid):
        services.memory_propose(actor=AGENT, tenant=tenant, subject="user:999999", content="Prefers tables.")
    with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(Forbidden):
        services.memory_propose(actor=auditor, tenant=tenant, subject="tenant", content="Prefers tables.")
    with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(NotFound):
        services.memory_propose(actor=analyst, tenant=other_tenant, subject="tenant", content="Prefers tables.")


def test_only_active_unexpired_memory_enters_the_context(analyst, supervisor, tenant, test_graphs, fake_provider):
    def propose(content, subject=f"user:{analyst.pk}"):
        return services.memory_propose(actor=AGENT, tenant=tenant, subject=subject, content=content)

    active = propose("Prefers short summaries.")
    services.memory_confirm(actor=analyst, memory=active)
    expired = propose("Prefers long summaries.")
    services.memory_confirm(actor=analyst, memory=expired)
    MemoryRecord.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    propose("Proposed only, never confirmed.")
    rejected = propose("Rejected preference.")
    services.memory_forget(actor=analyst, memory=rejected, reason="not true")
    forgotten = propose("Forgotten preference.")
    services.memory_confirm(actor=analyst, memory=forgotten)
    services.memory_forget(actor=analyst, memory=forgotten)
    others = propose("Another analyst's preference.", subject=f"user:{supervisor.pk}")
    services.memory_confirm(actor=supervisor, memory=others)
    team = propose("Team procedure: cite evidence ids.", subject="tenant")
    services.memory_confirm(actor=supervisor, memory=team)

    run = drive(services.run_start(actor=analyst, tenant=tenant, graph="test_chat", enqueue=False))
    call = ModelCall.objects.get(run=run)
    seen = {m["content"] for m in call.context["memory"]}
    assert seen == {"Prefers short summaries.", "Team procedure: cite evidence ids."}
    assert sorted(call.source_refs["memory_ids"]) == sorted([active.pk, team.pk])
    for absent in ("Prefers long summaries.", "Proposed only", "Rejected preference.", "Forgotten preference.",
                   "Another analyst"):
        assert absent not in str(call.messages)


def test_forget_and_reject(analyst, tenant):
    memory = services.memory_propose(actor=analyst, tenant=tenant, subject=f"user:{analyst.pk}",
                                     content="Prefers tables.")
    assert services.memory_forget(actor=analyst, memory=memory).status == MemoryStatus.REJECTED
    with assert_nothing_changed(extra={"memory": _memories}), pytest.raises(NotAllowed):
        services.memory_forget(actor=analyst, memory=memory)


def test_memory_propose_tool_from_a_run_is_idempotent(analyst, case, fake_provider):
    from runs.tools import tool_execute

    run = services.run_start(actor=analyst, case=case, enqueue=False)
    args = {"subject": f"user:{analyst.pk}", "content": "Prefers short summaries."}
    first = tool_execute(run=run, sequence=1, actor=AGENT, tool="memory_propose", action="remember", args=args)
    second = tool_execute(run=run, sequence=1, actor=AGENT, tool="memory_propose", action="remember", args=args)
    assert first.ok and first.result == second.result and MemoryRecord.objects.count() == 1
    refused = tool_execute(run=run, sequence=1, actor=AGENT, tool="memory_propose", action="remember-risk",
                           args={"subject": f"user:{analyst.pk}", "content": "The risk level is high."})
    assert not refused.ok and refused.error_code == "invalid" and MemoryRecord.objects.count() == 1
