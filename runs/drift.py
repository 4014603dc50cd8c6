"""The run engine's drift checks (registered in ops.drift.CHECKS): what runs recorded — a risk level in an
artifact, a notice believed sent, a memory, an approval under an old policy — against what the cases say now."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import OuterRef, Subquery
from django.utils import timezone

from cases import policy
from cases.models import (
    Approval,
    ApprovalDecision,
    Case,
    NoticeDispatch,
    NoticeStatus,
    Proposal,
    ProposalKind,
    ProposalStatus,
)
from ops.drift import DriftFinding
from runs.memory import domain_facts_claimed
from runs.models import Artifact, MemoryRecord, MemoryStatus, ToolCall, ToolCallStatus

RISK_ARTIFACT_KINDS = ("adjudication", "risk_assessment")
# A dispatch `sending` for longer than this is not in progress any more: its outcome is unknown.
SENDING_STALE_AFTER = timedelta(minutes=15)



def _scoped(qs, tenant_id: int | None):
    return qs.filter(tenant_id=tenant_id) if tenant_id is not None else qs


def check_artifact_risk(*, tenant_id: int | None = None) -> list[DriftFinding]:
    """The latest risk level an analysis recorded for a case differs from the case's risk level,
    and no pending proposal would bring them together (a person rejected it, or the case changed
    since)."""
    latest = Artifact.objects.filter(case=OuterRef("pk"), kind__in=RISK_ARTIFACT_KINDS).order_by("-id")
    cases = list(_scoped(Case.objects, tenant_id).annotate(artifact_id=Subquery(latest.values("id")[:1]))
                 .filter(artifact_id__isnull=False).values("pk", "reference", "risk_level", "version", "artifact_id"))
    artifacts = Artifact.objects.in_bulk([c["artifact_id"] for c in cases])
    pending = set(Proposal.objects.filter(case_id__in=[c["pk"] for c in cases], kind=ProposalKind.RISK_LEVEL,
                                          status=ProposalStatus.PENDING).values_list("case_id", "payload__risk_level"))
    found = []
    for case in cases:
        artifact = artifacts[case["artifact_id"]]
        level = (artifact.content or {}).get("risk_level")
        if not level or level == case["risk_level"] or (case["pk"], level) in pending:
            continue
        found.append(DriftFinding(
            "artifact_risk_vs_case",
            f"{artifact.kind} A{artifact.pk} of run R{artifact.run_id} says risk {level}, but {case['reference']} "
            f"is at {case['risk_level']} (v{case['version']}) and no pending proposal would reconcile them; "
            f"re-run the analysis or review the assessment.",
            [f"case:{case['reference']}", f"artifact:{artifact.pk}", f"run:{artifact.run_id}"]))
    return found


def check_notice_belief(*, tenant_id: int | None = None) -> list[DriftFinding]:
    """A run recorded a notice as sent (a succeeded notice_dispatch tool call) but the notice has no
    sent dispatch; or a dispatch has been `sending` so long its outcome is unknown."""
    found = []
    calls = ToolCall.objects.filter(tool="notice_dispatch", status=ToolCallStatus.SUCCEEDED).select_related("run")
    if tenant_id is not None:
        calls = calls.filter(run__tenant_id=tenant_id)
    for call in calls:
        notice_id = (call.result or {}).get("notice_id")
        dispatch = NoticeDispatch.objects.filter(notice_id=notice_id).first()
        if dispatch is None or dispatch.status != "sent":
            state = "no dispatch" if dispatch is None else f"its dispatch is {dispatch.status}"
            found.append(DriftFinding(
                "notice_believed_sent",
                f"Run R{call.run_id} recorded notice N{notice_id} as sent (tool call {call.idempotency_key}), but "
                f"it has {state}.", [f"run:{call.run_id}", f"notice:{notice_id}", f"tool_call:{call.pk}"]))
    stale = _scoped(NoticeDispatch.objects, tenant_id).filter(
        status="sending", started_at__lt=timezone.now() - SENDING_STALE_AFTER).select_related("notice")
    for dispatch in stale:
        found.append(DriftFinding(
            "notice_believed_sent",
            f"Notice N{dispatch.notice_id} has been sending since {dispatch.started_at:%Y-%m-%d %H:%M} UTC; whether "
            f"it went out is unknown. Check the mail log for Message-ID {dispatch.message_id} before any retry.",
            [f"notice:{dispatch.notice_id}", f"dispatch:{dispatch.pk}"]))
    return found


def check_memory(*, tenant_id: int | None = None) -> list[DriftFinding]:
    """Active memory that asserts a domain fact (status, risk level, notice sent). New proposals of
    that kind are refused; this finds older ones, and says when they contradict the case."""
    found = []
    memories = _scoped(MemoryRecord.objects, tenant_id).filter(status=MemoryStatus.ACTIVE,
                                                              expires_at__gt=timezone.now())
    for memory in memories:
        facts = domain_facts_claimed(memory.content)
        if not facts:
            continue
        detail = ""
        if memory.subject.startswith("case:"):
            case = Case.objects.filter(tenant_id=memory.tenant_id, reference=memory.subject[5:]).first()
            if case is not None:
                wrong = [f"{name} {value} (case: {getattr(case, name)})" for name, value in facts.items()
                         if name in ("status", "risk_level") and value != getattr(case, name)]
                detail = f"; it contradicts the case: {', '.join(wrong)}" if wrong else ""
        claimed = ", ".join(f"{k} {v}" for k, v in sorted(facts.items()))
        found.append(DriftFinding(
            "memory_vs_domain",
            f"Memory M{memory.pk} ({memory.subject}) holds a domain fact ({claimed}){detail}. Memory must not "
            f"hold domain facts; forget it.", [f"memory:{memory.pk}", memory.subject]))
    return found


def check_policy_version(*, tenant_id: int | None = None) -> list[DriftFinding]:
    """Pending proposals, and approvals of notices not yet sent, made under another policy version
    than the one in force: they were judged against rules that changed."""
    current = policy.POLICY_VERSION
    found = []
    for proposal in _scoped(Proposal.objects, tenant_id).filter(status=ProposalStatus.PENDING).exclude(
            policy_version=current).select_related("case"):
        found.append(DriftFinding(
            "old_policy_version",
            f"Proposal P{proposal.pk} on {proposal.case.reference} was made under policy {proposal.policy_version}; "
            f"policy {current} is in force. Ask for a fresh proposal.",
            [f"proposal:{proposal.pk}", f"case:{proposal.case.reference}"]))
    approvals = _scoped(Approval.objects, tenant_id).filter(
        decision=ApprovalDecision.APPROVED, voided_at__isnull=True, notice__isnull=False,
        notice__status__in=[NoticeStatus.APPROVED, NoticeStatus.FAILED]).exclude(policy_version=current)
    for approval in approvals.select_related("notice"):
        found.append(DriftFinding(
            "old_policy_version",
            f"Notice N{approval.notice_id} is approved (A{approval.pk}) under policy {approval.policy_version} and "
            f"not sent yet; policy {current} is in force. Have it re-approved before sending.",
            [f"approval:{approval.pk}", f"notice:{approval.notice_id}"]))
    return found
