"""The tool executor (docs/architecture.md, "The run engine" and "Agents propose, people decide"): every side effect a node asks for is a ToolCall.

`tool_execute` is the single path:
  1. The idempotency key is `<run id>:<step sequence>:<action>`. If a ToolCall with that key
     exists, its recorded outcome is returned; one still `started` (the worker died after acting
     and before recording) is *reconciled* through the key — the Proposal / Notice / memory the
     effect would have created is looked up — and never repeated blindly.
  2. Policy decision: `read_only` and `draft` effects are allowed; `internal_mutation`,
     `external_notification` and `irreversible` are refused unless a valid approval exists in the
     database (an Approval row a person made, bound to the target's content) — never because of
     anything in a prompt, evidence or message. Refusals are recorded (ToolCall `refused` +
     audit event) and returned, not raised.
  3. The ToolCall row is committed as `started` BEFORE the effect.
  4. The effect runs through the owning app's services with the idempotency key (so even a
     repeat cannot duplicate it), in that service's own transaction.
  5. The outcome (result / domain error) is recorded on the ToolCall; the step links it on commit.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import audit_record
from cases import policy
from cases import services as case_services
from cases.models import Approval, ApprovalDecision, Case, Notice, NoticeDispatch, Proposal
from cases.snapshot import case_snapshot
from core.actors import Actor
from core.errors import DomainError, Invalid, NotFound
from ops import metrics
from runs.memory import memory_propose
from runs.models import EffectType, MemoryRecord, ToolCall, ToolCallStatus

logger = logging.getLogger(__name__)


@dataclass
class ToolInvocation:
    run: object  # runs.models.AgentRun
    sequence: int
    actor: Actor
    args: dict
    idempotency_key: str

    @property
    def case(self):
        if self.run.case_id is None:
            raise Invalid("This tool needs a run attached to a case.")
        return self.run.case


@dataclass
class ToolOutcome:
    result: dict
    external_ref: str = ""
    error: str = ""  # set by a reconciler that found the effect in a failed/unknown state


@dataclass
class ToolResult:
    ok: bool
    status: str
    result: dict = field(default_factory=dict)
    error: str = ""
    error_code: str = ""
    refused: bool = False
    reconciled: bool = False
    tool_call_id: int | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    effect_type: str
    description: str
    perform: Callable[[ToolInvocation], ToolOutcome]
    # Looks the effect up by its idempotency key: the outcome if it happened, None if it did not.
    reconcile: Callable[[ToolInvocation], ToolOutcome | None] | None = None
    # For effects beyond read_only/draft: the Approval (made by a person, in the database) that
    # authorises this exact effect, or None.
    approval: Callable[[ToolInvocation], Approval | None] | None = None


TOOLS: dict[str, Tool] = {}


def register_tool(tool: Tool) -> Tool:
    if tool.effect_type not in EffectType.values:
        raise ValueError(f"Unknown effect type {tool.effect_type!r}.")
    TOOLS[tool.name] = tool
    return tool


def idempotency_key(*, run_id: int, sequence: int, action: str) -> str:
    return f"{run_id}:{sequence}:{action}"


# --- the executor -----------------------------------------------------------------------------

def _result_from_row(row: ToolCall) -> ToolResult:
    return ToolResult(ok=row.status == ToolCallStatus.SUCCEEDED, status=row.status, result=row.result or {},
                      error=row.error, error_code=row.error_code, refused=row.status == ToolCallStatus.REFUSED,
                      reconciled=row.reconciled, tool_call_id=row.pk)


def _policy(tool: Tool | None, invocation: ToolInvocation) -> tuple[bool, str, Approval | None]:
    if tool is None:
        return False, "Unknown tool: only registered tools can be called.", None
    if tool.effect_type in EffectType.without_approval():
        return True, f"{tool.effect_type} effects need no approval.", None
    approval = tool.approval(invocation) if tool.approval is not None else None
    if approval is None:
        return False, (f"{tool.name} is a {tool.effect_type} effect and needs a valid approval recorded by an "
                       f"authorised person; none exists. Text in evidence, messages or prompts is never an "
                       f"approval."), None
    return True, f"Approved by approval A{approval.pk} ({approval.policy_version}).", approval


def _refuse(*, run, sequence: int, actor: Actor, tool_name: str, action: str, args: dict, key: str,
            effect_type: str, reason: str) -> ToolResult:
    now = timezone.now()
    try:
        with transaction.atomic():
            row = ToolCall.objects.create(
                run=run, sequence=sequence, tool=tool_name, action=action, effect_type=effect_type,
                idempotency_key=key, arguments=args, actor_id=actor.identifier, policy_decision="denied",
                policy_reason=reason, status=ToolCallStatus.REFUSED, error=reason, error_code="forbidden",
                started_at=now, finished_at=now, duration_ms=0)
            audit_record(tenant_id=run.tenant_id, case_id=run.case_id, actor_type=actor.kind,
                         actor_id=actor.identifier, action="runs.tool.refused", target_type="tool_call",
                         target_id=row.pk, run_id=str(run.pk), policy_version=policy.POLICY_VERSION,
                         decision="denied", payload={"tool": tool_name, "action": action, "reason": reason,
                                                     "effect_type": effect_type})
    except IntegrityError:
        # A concurrent copy of this step recorded the same key first: its outcome stands.
        return _result_from_row(ToolCall.objects.get(idempotency_key=key))
    return _result_from_row(row)


def _finish(row: ToolCall, *, outcome: ToolOutcome | None = None, error: DomainError | None = None,
            reconciled: bool = False) -> ToolCall:
    """Record a tool call's outcome. Conditional on `started`, so two recorders cannot both win."""
    now = timezone.now()
    values = {"finished_at": now, "reconciled": reconciled,
              "duration_ms": int((now - row.started_at).total_seconds() * 1000)}
    if outcome is not None and not outcome.error:
        values |= {"status": ToolCallStatus.SUCCEEDED, "result": outcome.result,
                   "external_ref": outcome.external_ref}
    elif outcome is not None:
        values |= {"status": ToolCallStatus.FAILED, "result": outcome.result, "external_ref": outcome.external_ref,
                   "error": outcome.error, "error_code": "unknown_outcome"}
    else:
        values |= {"status": ToolCallStatus.FAILED, "error": error.message, "error_code": error.code,
                   "result": {"fields": error.fields} if error.fields else None}
    ToolCall.objects.filter(pk=row.pk, status=ToolCallStatus.STARTED).update(**values)
    metrics.tool_observed(tool=row.tool, outcome=values["status"], seconds=values["duration_ms"] / 1000)
    return ToolCall.objects.get(pk=row.pk)


def _maybe_pause_after_effect(tool_name: str, invocation: ToolInvocation) -> None:
    """Crash-test hook (settings.ARBITER_FAULT_PAUSE_AFTER_EFFECT = "<tool>:<marker file>"): after
    the effect committed and before its outcome is recorded, write the marker and sleep so the test
    can SIGKILL this process at exactly the point where the outcome is unknown. Off by default."""
    spec = settings.ARBITER_FAULT_PAUSE_AFTER_EFFECT
    if not spec:
        return
    name, _, marker = spec.partition(":")
    if name != tool_name or not marker or os.path.exists(marker):
        return
    with open(marker, "w") as handle:
        handle.write(f"{invocation.run.pk} {invocation.idempotency_key}\n")
    logger.warning("fault injection: paused after %s (%s)", tool_name, invocation.idempotency_key)
    time.sleep(3600)


def tool_execute(*, run, sequence: int, actor: Actor, tool: str, action: str, args: dict) -> ToolResult:
    """Run one tool call for a node (see the module docstring for the guarantees)."""
    key = idempotency_key(run_id=run.pk, sequence=sequence, action=action)
    definition = TOOLS.get(tool)
    invocation = ToolInvocation(run=run, sequence=sequence, actor=actor, args=dict(args), idempotency_key=key)

    existing = ToolCall.objects.filter(idempotency_key=key).first()
    if existing is not None:
        if existing.tool != tool:
            raise ValueError(f"Action {action!r} of step {sequence} was already used for tool {existing.tool!r}; "
                             f"each tool call in a step needs its own action name.")
        if existing.status != ToolCallStatus.STARTED:
            return _result_from_row(existing)
        return _reconcile(definition, existing, invocation)

    allowed, reason, approval = _policy(definition, invocation)
    effect_type = definition.effect_type if definition else EffectType.IRREVERSIBLE
    if not allowed:
        return _refuse(run=run, sequence=sequence, actor=actor, tool_name=tool, action=action, args=args, key=key,
                       effect_type=effect_type, reason=reason)

    # Commit `started` before acting: if this process dies during or after the effect, the row says
    # an effect may have happened, and the next attempt reconciles instead of acting again.
    try:
        with transaction.atomic():
            row = ToolCall.objects.create(
                run=run, sequence=sequence, tool=tool, action=action, effect_type=effect_type, idempotency_key=key,
                arguments=args, actor_id=actor.identifier, policy_decision="allowed", policy_reason=reason,
                approval=approval, status=ToolCallStatus.STARTED, started_at=timezone.now())
    except IntegrityError:
        existing = ToolCall.objects.get(idempotency_key=key)
        if existing.status != ToolCallStatus.STARTED:
            return _result_from_row(existing)
        return _reconcile(definition, existing, invocation)
    return _perform(definition, row, invocation)


def _perform(definition: Tool, row: ToolCall, invocation: ToolInvocation) -> ToolResult:
    try:
        outcome = definition.perform(invocation)
    except DomainError as exc:
        # The service refused and changed nothing: a definite outcome, recorded as failed.
        return _result_from_row(_finish(row, error=exc))
    _maybe_pause_after_effect(definition.name, invocation)
    return _result_from_row(_finish(row, outcome=outcome))


def _reconcile(definition: Tool | None, row: ToolCall, invocation: ToolInvocation) -> ToolResult:
    if definition is None:
        return _result_from_row(_finish(row, error=NotFound("The tool is no longer registered.")))
    found = definition.reconcile(invocation) if definition.reconcile is not None else None
    if found is not None:
        logger.info("tool call %s reconciled by its idempotency key", row.idempotency_key)
        return _result_from_row(_finish(row, outcome=found, reconciled=True))
    if definition.effect_type not in EffectType.without_approval() and definition.reconcile is None:
        # No way to tell whether an approved effect happened: never repeat it blindly.
        return _result_from_row(_finish(row, outcome=ToolOutcome(
            result={}, error="The outcome of this effect is unknown and it cannot be looked up; an operator must "
                             "check it before anything is retried."), reconciled=True))
    # The lookup proves the effect did not happen: performing it now is the first time.
    return _perform(definition, row, invocation)


def _actor_from_identifier(identifier: str) -> Actor:
    kind, _, rest = identifier.partition(":")
    if kind == Actor.AGENT:
        name, _, version = rest.partition("@")
        return Actor.agent(name, version)
    return Actor.system(rest or identifier)


def tool_reconcile_unfinished(*, run, sequence: int) -> list[int]:
    """At the start of a (re)attempted step: settle the tool calls an earlier attempt of this step
    left `started` (its worker died), by looking each effect up through its idempotency key. Found
    effects are recorded as succeeded (reconciled) whatever the node does next — it may not ask
    for them again (e.g. it now sees the proposal and skips it). Returns the settled ids."""
    settled = []
    for row in ToolCall.objects.filter(run=run, sequence=sequence, status=ToolCallStatus.STARTED):
        definition = TOOLS.get(row.tool)
        if definition is None or definition.reconcile is None:
            continue
        invocation = ToolInvocation(run=run, sequence=sequence, actor=_actor_from_identifier(row.actor_id),
                                    args=dict(row.arguments), idempotency_key=row.idempotency_key)
        found = definition.reconcile(invocation)
        if found is not None:
            _finish(row, outcome=found, reconciled=True)
            settled.append(row.pk)
    settled.extend(_complete_interrupted_drafts(run=run, sequence=sequence))
    return settled


# An agent's notice draft is always followed by its submission in the same step (the
# notice_drafter node). An attempt that died between the two left a draft outside the review
# inbox; the retried attempt completes the submission first, under the idempotency key the node
# itself uses for it (`<run>:<step>:submit-notice`), so the node's own submit finds it done and
# nothing is submitted twice.
DRAFT_SUBMIT_ACTION = "submit-notice"


def _complete_interrupted_drafts(*, run, sequence: int) -> list[int]:
    completed = []
    for row in ToolCall.objects.filter(run=run, sequence=sequence, tool="notice_draft",
                                       status=ToolCallStatus.SUCCEEDED):
        notice_id = (row.result or {}).get("notice_id")
        decided = ToolCall.objects.filter(run=run, sequence=sequence, tool="notice_submit").exclude(
            status=ToolCallStatus.STARTED).exists()
        if decided or not Notice.objects.filter(pk=notice_id, run_id=str(run.pk), status="draft").exists():
            continue
        result = tool_execute(run=run, sequence=sequence, actor=_actor_from_identifier(row.actor_id),
                              tool="notice_submit", action=DRAFT_SUBMIT_ACTION, args={"notice_id": notice_id})
        logger.info("run %s step %s: notice N%s drafted by a dead attempt was submitted on retry (%s)", run.pk,
                    sequence, notice_id, result.status)
        if result.tool_call_id:
            completed.append(result.tool_call_id)
    return completed


def tool_abandon_unfinished(*, run, sequence: int) -> list[int]:
    """At a step's commit: tool calls of this step still `started` were left by a dead attempt,
    their effect was looked up at the step's start and not found, and the step finished without
    asking for them again. Record them as not performed (or, for an effect that cannot be looked
    up, as unknown for an operator to check)."""
    now = timezone.now()
    ids = []
    for row in ToolCall.objects.select_for_update().filter(run=run, sequence=sequence, status=ToolCallStatus.STARTED):
        definition = TOOLS.get(row.tool)
        checked = definition is not None and (definition.reconcile is not None
                                              or definition.effect_type == EffectType.READ_ONLY)
        row.status = ToolCallStatus.FAILED
        row.finished_at = now
        row.reconciled = True
        row.error_code = "abandoned" if checked else "unknown_outcome"
        row.error = ("Not performed: an earlier attempt of this step died before acting, and the retried step "
                     "did not ask for it again." if checked else
                     "The outcome of this effect is unknown and it cannot be looked up; an operator must check it.")
        row.save(update_fields=["status", "finished_at", "reconciled", "error_code", "error"])
        ids.append(row.pk)
    return ids


# --- tools -------------------------------------------------------------------------------------

def _case_read(inv: ToolInvocation) -> ToolOutcome:
    case = Case.objects.get(pk=inv.case.pk)
    return ToolOutcome(result={"case": case_snapshot(case),
                               "available_transitions": [t.name for t in case.get_available_status_transitions()]})


def _requested_by(inv: ToolInvocation):
    """The person who asked the agent for this change: in a thread, the user whose message
    started the run (four eyes: they cannot approve what they asked for). A case analysis is
    asked for as a whole, not change by change, so it names no requester."""
    return inv.run.started_by_user if inv.run.thread_id else None


def _proposal_outcome(proposal: Proposal) -> ToolOutcome:
    return ToolOutcome(result={"proposal_id": proposal.pk, "kind": proposal.kind, "payload": proposal.payload,
                               "status": proposal.status, "case_version": proposal.case_version},
                       external_ref=f"proposal:{proposal.pk}")


def _proposal_create(inv: ToolInvocation) -> ToolOutcome:
    proposal = case_services.proposal_create(actor=inv.actor, case=inv.case, kind=str(inv.args.get("kind", "")),
                               payload=dict(inv.args.get("payload") or {}),
                               rationale=str(inv.args.get("rationale", "")),
                               evidence_refs=list(inv.args.get("evidence_refs") or []), run_id=str(inv.run.pk),
                               idempotency_key=inv.idempotency_key, requested_by=_requested_by(inv))
    return _proposal_outcome(proposal)


def _proposal_reconcile(inv: ToolInvocation) -> ToolOutcome | None:
    proposal = Proposal.objects.filter(tenant_id=inv.run.tenant_id, idempotency_key=inv.idempotency_key).first()
    return _proposal_outcome(proposal) if proposal else None


def _notice_outcome(notice: Notice) -> ToolOutcome:
    return ToolOutcome(result={"notice_id": notice.pk, "status": notice.status, "content_hash": notice.content_hash},
                       external_ref=f"notice:{notice.pk}")


def _notice_draft(inv: ToolInvocation) -> ToolOutcome:
    notice = case_services.notice_draft(actor=inv.actor, case=inv.case, subject=str(inv.args.get("subject", "")),
                          body=str(inv.args.get("body", "")), kind=str(inv.args.get("kind") or "response"),
                          run_id=str(inv.run.pk), idempotency_key=inv.idempotency_key,
                          requested_by=_requested_by(inv),
                          consumer_request=str(inv.args.get("consumer_request") or ""))  # for the notice checker
    return _notice_outcome(notice)


def _notice_draft_reconcile(inv: ToolInvocation) -> ToolOutcome | None:
    notice = Notice.objects.filter(tenant_id=inv.run.tenant_id, idempotency_key=inv.idempotency_key).first()
    return _notice_outcome(notice) if notice else None


def _run_notice(inv: ToolInvocation) -> Notice:
    """The notice named in the arguments, only if it belongs to this run's case (and tenant)."""
    notice = Notice.objects.filter(pk=inv.args.get("notice_id"), tenant_id=inv.run.tenant_id,
                                   case_id=inv.run.case_id).first()
    if notice is None:
        raise NotFound("No such notice on this run's case.")
    return notice


def _notice_submit(inv: ToolInvocation) -> ToolOutcome:
    return _notice_outcome(case_services.notice_submit(actor=inv.actor, notice=_run_notice(inv)))


def _notice_submit_reconcile(inv: ToolInvocation) -> ToolOutcome | None:
    try:
        notice = _run_notice(inv)
    except NotFound:
        return None
    if notice.submitted_by == inv.actor.identifier and notice.status != "draft":
        return _notice_outcome(notice)
    return None


def _dispatch_approval(inv: ToolInvocation) -> Approval | None:
    """A person's approval of exactly the notice's current content, not voided."""
    try:
        notice = _run_notice(inv)
    except NotFound:
        return None
    return (Approval.objects.filter(notice=notice, decision=ApprovalDecision.APPROVED, voided_at__isnull=True,
                                    content_hash=notice.content_hash).order_by("-created_at").first())


def _notice_dispatch(inv: ToolInvocation) -> ToolOutcome:
    # cases.services refuses agent actors for sending; the approval checked above is what
    # authorises this effect, and the system actor names the run that carried it out.
    sender = Actor.system(f"run-{inv.run.pk}")
    notice = case_services.notice_dispatch(actor=sender, notice=_run_notice(inv))
    outcome = _notice_outcome(notice)
    if notice.status != "sent":
        outcome.error = f"The notice was not sent (status {notice.status}); see its dispatch record."
    return outcome


def _notice_dispatch_reconcile(inv: ToolInvocation) -> ToolOutcome | None:
    dispatch = NoticeDispatch.objects.filter(notice_id=inv.args.get("notice_id"),
                                             tenant_id=inv.run.tenant_id).first()
    if dispatch is None:
        return None  # never started: sending now is the first attempt
    notice = Notice.objects.get(pk=dispatch.notice_id)
    outcome = _notice_outcome(notice)
    outcome.result["message_id"] = dispatch.message_id
    if dispatch.status != "sent":
        outcome.error = (f"Dispatch is {dispatch.status}; it is never re-sent blindly. Check the mail log for "
                         f"Message-ID {dispatch.message_id} before retrying.")
    return outcome


def _memory_outcome(memory: MemoryRecord) -> ToolOutcome:
    return ToolOutcome(result={"memory_id": memory.pk, "status": memory.status, "subject": memory.subject},
                       external_ref=f"memory:{memory.pk}")


def _memory_propose(inv: ToolInvocation) -> ToolOutcome:
    memory = memory_propose(actor=inv.actor, tenant=inv.run.tenant, subject=str(inv.args.get("subject", "")),
                            content=str(inv.args.get("content", "")),
                            memory_type=str(inv.args.get("type") or "preference"),
                            confidence=float(inv.args.get("confidence", 0.5)),
                            source_refs=dict(inv.args.get("source_refs") or {}), run=inv.run,
                            idempotency_key=inv.idempotency_key)
    return _memory_outcome(memory)


def _memory_reconcile(inv: ToolInvocation) -> ToolOutcome | None:
    memory = MemoryRecord.objects.filter(idempotency_key=inv.idempotency_key).first()
    return _memory_outcome(memory) if memory else None


register_tool(Tool("case_read", EffectType.READ_ONLY, "A fresh snapshot of the run's case and the transitions "
                   "possible from its status.", perform=_case_read))
register_tool(Tool("proposal_create", EffectType.DRAFT, "Propose a status transition, risk level or assignment; "
                   "args: kind, payload, rationale, evidence_refs.", perform=_proposal_create,
                   reconcile=_proposal_reconcile))
register_tool(Tool("notice_draft", EffectType.DRAFT, "Draft a notice to the complainant (nothing is sent); "
                   "args: subject, body, kind, consumer_request.", perform=_notice_draft, reconcile=_notice_draft_reconcile))
register_tool(Tool("notice_submit", EffectType.DRAFT, "Submit a drafted notice for a supervisor's approval; "
                   "args: notice_id.", perform=_notice_submit, reconcile=_notice_submit_reconcile))
register_tool(Tool("notice_dispatch", EffectType.EXTERNAL_NOTIFICATION, "Send an approved notice; needs a "
                   "person's valid approval of its current content. args: notice_id.", perform=_notice_dispatch,
                   reconcile=_notice_dispatch_reconcile, approval=_dispatch_approval))
register_tool(Tool("memory_propose", EffectType.DRAFT, "Propose a memory (a preference or procedure, never a "
                   "domain fact) for a person to confirm; args: subject, content, type, confidence.",
                   perform=_memory_propose, reconcile=_memory_reconcile))
