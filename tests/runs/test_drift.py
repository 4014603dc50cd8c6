"""Drift checks and `manage.py drift_report` (exit 1 on drift)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from cases import services as case_services
from cases.models import NoticeDispatch, Proposal
from ops.drift import CHECKS, run_drift_checks
from runs import services
from runs.models import EffectType, MemoryRecord, MemoryStatus, ToolCall, ToolCallStatus
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def _report(capsys, *args) -> tuple[int, str]:
    try:
        call_command("drift_report", *args)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().out


def test_no_drift_exits_zero(capsys, case):
    code, out = _report(capsys)
    assert code == 0 and out.startswith(f"No drift found ({len(CHECKS)} check(s)")


def test_an_artifact_risk_the_case_does_not_have_is_drift_once_nothing_would_reconcile_it(
        analyst, supervisor, case, fake_provider, capsys, other_tenant):
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run_drift_checks(only=["artifact_risk_vs_case"]) == []  # a pending proposal would reconcile it
    proposal = Proposal.objects.get(run_id=str(run.pk), kind="risk_level")
    case_services.proposal_reject(actor=supervisor, proposal=proposal, note="not convinced")
    found = run_drift_checks(only=["artifact_risk_vs_case"])
    assert len(found) == 1
    assert "says risk medium" in found[0].message and f"case:{case.reference}" in found[0].objects
    assert f"run:{run.pk}" in found[0].objects
    code, out = _report(capsys, "--tenant", "acme")
    assert code == 1 and "artifact_risk_vs_case:" in out and "1 drift finding(s)." in out
    assert _report(capsys, "--tenant", "other")[0] == 0


def test_a_run_that_believes_a_notice_was_sent_without_a_dispatch(analyst, case, fake_provider):
    run = services.run_start(actor=analyst, case=case, enqueue=False)
    notice = case_services.notice_draft(actor=analyst, case=case, subject="Hello", body="Body")
    ToolCall.objects.create(run=run, sequence=1, tool="notice_dispatch", action="send",
                            effect_type=EffectType.EXTERNAL_NOTIFICATION, idempotency_key=f"{run.pk}:1:send",
                            arguments={"notice_id": notice.pk}, actor_id="agent:x@1", policy_decision="allowed",
                            status=ToolCallStatus.SUCCEEDED, result={"notice_id": notice.pk, "status": "sent"},
                            started_at=timezone.now())
    found = run_drift_checks(only=["notice_believed_sent"])
    assert len(found) == 1 and "has no dispatch" in found[0].message
    assert found[0].objects[:2] == [f"run:{run.pk}", f"notice:{notice.pk}"]


def test_a_dispatch_stuck_sending_is_reported(analyst, supervisor, case):
    notice = case_services.notice_draft(actor=analyst, case=case, subject="Hello", body="Body")
    case_services.notice_submit(actor=analyst, notice=notice)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    dispatch = NoticeDispatch.objects.create(tenant_id=case.tenant_id, notice=notice, approval=notice.approvals.get(),
                                             content_hash=notice.content_hash, message_id="<x@y>", status="sending",
                                             dispatched_by="user:1")
    assert run_drift_checks(only=["notice_believed_sent"]) == []
    NoticeDispatch.objects.filter(pk=dispatch.pk).update(started_at=timezone.now() - timedelta(hours=1))
    found = run_drift_checks(only=["notice_believed_sent"])
    assert len(found) == 1 and "Message-ID <x@y>" in found[0].message


def test_memory_that_holds_a_domain_fact_is_drift(case, tenant):
    # Written before the refusal rule existed (services refuse it now), e.g. imported data.
    memory = MemoryRecord.objects.create(tenant=tenant, subject=f"case:{case.reference}",
                                         content="The case is closed and risk level is high.",
                                         status=MemoryStatus.ACTIVE, proposed_by="agent:x@1",
                                         expires_at=timezone.now() + timedelta(days=1))
    found = run_drift_checks(only=["memory_vs_domain"])
    assert len(found) == 1 and f"memory:{memory.pk}" in found[0].objects
    assert "contradicts the case: status closed (case: new), risk_level high (case: unassessed)" in found[0].message
    MemoryRecord.objects.filter(pk=memory.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert run_drift_checks(only=["memory_vs_domain"]) == []


def test_pending_proposals_and_approvals_under_an_old_policy(analyst, supervisor, case):
    proposal = case_services.proposal_create(actor=analyst, case=case, kind="risk_level",
                                             payload={"risk_level": "high"}, rationale="r")
    notice = case_services.notice_draft(actor=analyst, case=case, subject="Hello", body="Body")
    case_services.notice_submit(actor=analyst, notice=notice)
    case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    assert run_drift_checks(only=["old_policy_version"]) == []
    Proposal.objects.filter(pk=proposal.pk).update(policy_version="2025.1.0")
    notice.approvals.update(policy_version="2025.1.0")
    found = run_drift_checks(only=["old_policy_version"])
    assert [f.objects[0] for f in found] == [f"proposal:{proposal.pk}", f"approval:{notice.approvals.get().pk}"]


def test_the_conversation_check_is_registered_and_runs(case):
    assert CHECKS["conversation_cited_facts"] == "conversations.drift.check_conversation_cited_facts"
    assert run_drift_checks(only=["conversation_cited_facts"]) == []
