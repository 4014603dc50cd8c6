"""Shared bits of the runs management commands: who acts, finding rows, printing an outcome."""

from __future__ import annotations

import os
import socket

from django.core.management.base import CommandError

from accounts.models import User
from core.actors import Actor
from runs.executor import drive_inline
from runs.models import AgentRun
from runs.providers import prepare_provider
from runs.selectors import run_outcome, run_queue_position


def add_actor_argument(parser) -> None:
    parser.add_argument("--user", help="Act as this user (username); default: the system actor 'cli'.")


def actor_from(options) -> Actor:
    username = options.get("user")
    if not username:
        return Actor.system("cli")
    user = User.objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"No user {username!r}.")
    return Actor.for_user(user)


def get_run(run_id) -> AgentRun:
    run = AgentRun.objects.filter(pk=run_id).select_related("case").first()
    if run is None:
        raise CommandError(f"No run {run_id}.")
    return run


def inline_worker_id() -> str:
    return f"inline:{socket.gethostname()}:{os.getpid()}"


def drive_here(run: AgentRun, *, timeout_seconds: float, say=None, on_step=None) -> AgentRun:
    """Execute `run` in this process (`--inline`): this process is the worker, so it first readies
    the run's provider (the offline analyst trains its classifier if none is stored: no worker is
    there to ask), then drives the run to its end or its first wait."""
    try:
        prepare_provider(run.provider_name or None, say=say)
    except OSError as exc:
        raise CommandError(f"Could not prepare the model provider {run.provider_name!r}: {exc}") from exc
    kwargs = {"on_step": on_step} if on_step is not None else {}
    return drive_inline(run_id=run.pk, worker_id=inline_worker_id(), timeout_seconds=timeout_seconds, **kwargs)


def write_outcome(out, run: AgentRun) -> None:
    outcome = run_outcome(run=run)
    case = run.case.reference if run.case_id else "—"
    out.write(f"Run R{run.pk} ({run.graph}) on {case}: {run.status}, phase {run.phase}; "
              f"{run.steps_used} step(s), {run.tokens_used} tokens; provider {run.provider_name}"
              f"{' / ' + run.model_name if run.model_name else ''}.")
    if run.status == "queued":
        out.write(f"  Queue position: {run_queue_position(run=run)}.")
    if run.parent_run_id:
        out.write(f"  Forked from R{run.parent_run_id} after step {run.forked_from_checkpoint.sequence}.")
    if run.error:
        out.write(f"  Error ({run.error_code}): {run.error}")
    out.write("Steps:")
    for step in outcome["steps"]:
        copied = " (copied from parent)" if step.copied_from_id else ""
        detail = f" — {step.error}" if step.error else (f" — {step.summary}" if step.summary else "")
        out.write(f"  {step.sequence:>3} {step.node:<17} {step.status:<9} {step.outcome}"
                  f"{' → ' + step.next_node if step.next_node else ''}{copied}{detail}")
    out.write(f"Findings ({len(outcome['findings'])}):")
    for finding in outcome["findings"]:
        contra = f" [contradicts F{finding.contradicts_id}]" if finding.contradicts_id else ""
        out.write(f"  F{finding.pk} {finding.agent}/{finding.type}{contra}: {finding.summary[:200]}")
    disputes = [a for a in outcome["artifacts"] if a.kind == "dispute"]
    if disputes:
        out.write(f"Disputes ({len(disputes)}):")
        for artifact in disputes:
            out.write(f"  A{artifact.pk} {artifact.content.get('topic')}: {artifact.content.get('resolution', '')}")
    out.write(f"Proposals ({len(outcome['proposals'])}):")
    for proposal in outcome["proposals"]:
        out.write(f"  P{proposal.pk} {proposal.summary} — {proposal.status} (against v{proposal.case_version})")
    out.write(f"Notices drafted ({len(outcome['notices'])}):")
    for notice in outcome["notices"]:
        out.write(f"  N{notice.pk} {notice.get_status_display()}: {notice.subject}")
    refused = [c for c in outcome["tool_calls"] if c.status == "refused"]
    if refused:
        out.write(f"Refused tool calls ({len(refused)}):")
        for call in refused:
            out.write(f"  {call.tool} ({call.idempotency_key}): {call.policy_reason}")
