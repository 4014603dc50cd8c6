"""Assertions shared by the suite.

`assert_nothing_changed` is the check every denied path makes (docs/architecture.md, "House style"): it snapshots the
rows a refused service could have written — audit events and stream heads, case events,
proposals, approvals, notices, dispatches, evidence, files under MEDIA_ROOT, sent email, tasks
queued on commit — plus
each given case's (status, risk level, version), runs the block, and asserts the snapshot is
identical afterwards.

    with assert_nothing_changed(case), pytest.raises(Forbidden):
        services.case_transition(actor=agent, case=case, transition="triage")

Other apps can add their own tables with `extra={"runs": lambda: AgentRun.objects.count()}`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextlib import contextmanager

from django.conf import settings
from django.core import mail
from django.db import transaction

from audit.models import AuditEvent, AuditStreamHead
from cases.models import Approval, Case, CaseEvent, Evidence, Notice, NoticeDispatch, Proposal
from outbox.models import OutboxMessage


def _media_files() -> list[str]:
    root = str(settings.MEDIA_ROOT)
    found = []
    for directory, _subdirs, files in os.walk(root):
        found.extend(os.path.relpath(os.path.join(directory, name), root) for name in files)
    return sorted(found)


def snapshot(cases: Iterable[Case] = (), extra: dict[str, Callable[[], object]] | None = None) -> dict:
    """What a refused call must leave exactly as it was (read fresh from the database)."""
    state = {
        "audit_events": AuditEvent.objects.count(),
        "audit_heads": sorted(AuditStreamHead.objects.values_list("stream", "last_sequence", "last_hash")),
        "case_events": CaseEvent.objects.count(),
        "proposals": sorted(Proposal.objects.values_list("pk", "status", "decided_by_id")),
        "approvals": sorted(Approval.objects.values_list("pk", "decision", "voided_at")),
        "notices": sorted(Notice.objects.values_list("pk", "status", "content_hash", "version")),
        "dispatches": sorted(NoticeDispatch.objects.values_list("pk", "status", "attempts")),
        "evidence": Evidence.objects.count(),
        "media_files": _media_files(),
        "emails": len(mail.outbox),
        # Every task is queued with transaction.on_commit (runs, notice dispatch): inside a test's
        # transaction a queued task is a pending callback, so none may have been added.
        "queued_on_commit": len(transaction.get_connection().run_on_commit),
        # Tasks written to the transactional outbox: a refusal writes none.
        "outbox": sorted(OutboxMessage.objects.values_list("pk", "task", "relayed_at")),
        "cases": {
            case.pk: Case.objects.filter(pk=case.pk).values_list("status", "risk_level", "version").first()
            for case in cases
        },
    }
    for name, read in (extra or {}).items():
        state[name] = read()
    return state


@contextmanager
def assert_nothing_changed(*cases: Case, extra: dict[str, Callable[[], object]] | None = None):
    before = snapshot(cases, extra)
    yield before
    after = snapshot(cases, extra)
    assert after == before, "a refused call changed something"


class CountDelta:
    """How many rows a block added, for the allowed paths: `with CountDelta() as delta: ...`
    then `assert delta.case_events == 1`."""

    def __enter__(self) -> CountDelta:
        self._before = self._counts()
        return self

    def __exit__(self, *exc) -> None:
        after = self._counts()
        for name, value in after.items():
            setattr(self, name, value - self._before[name])

    @staticmethod
    def _counts() -> dict[str, int]:
        return {
            "audit_events": AuditEvent.objects.count(),
            "case_events": CaseEvent.objects.count(),
            "proposals": Proposal.objects.count(),
            "approvals": Approval.objects.count(),
            "notices": Notice.objects.count(),
            "dispatches": NoticeDispatch.objects.count(),
            "evidence": Evidence.objects.count(),
            "emails": len(mail.outbox),
            "outbox": OutboxMessage.objects.count(),
        # Every task is queued with transaction.on_commit (runs, notice dispatch): inside a test's
        # transaction a queued task is a pending callback, so none may have been added.
        "queued_on_commit": len(transaction.get_connection().run_on_commit),
        }


# --- walking a case through its lifecycle (through the services, as a person would) ----------

PATH_TO_STATUS: dict[str, list[str]] = {
    "new": [],
    "triaged": ["triage"],
    "under_review": ["triage", "start_review"],
    "waiting_for_evidence": ["triage", "start_review", "request_evidence"],
    "ready_for_decision": ["triage", "start_review", "mark_ready"],
    "decided": ["triage", "start_review", "mark_ready", "decide"],
    "closed": ["triage", "start_review", "mark_ready", "decide", "close"],
}


def assess_risk(case: Case, *, level: str, proposer, approver) -> Case:
    """Set the risk level the only way there is: a proposal approved by someone else."""
    from cases import services

    proposal = services.proposal_create(actor=proposer, case=case, kind="risk_level",
                                        payload={"risk_level": level}, rationale="Assessed from the narrative.")
    services.proposal_approve(actor=approver, proposal=proposal, note="Agreed.")
    case.refresh_from_db()
    return case


def bring_case_to(case: Case, status: str, *, supervisor, analyst=None) -> Case:
    """Move `case` from new to `status` with direct transitions by `supervisor`. Statuses at or
    past ready_for_decision need an assessed risk level: it is set first (proposed by `analyst`)."""
    from cases import services

    steps = PATH_TO_STATUS[status]
    if "mark_ready" in steps and case.risk_level == "unassessed":
        if analyst is None:
            raise ValueError(f"bringing a case to {status} needs an analyst to propose the risk level")
        assess_risk(case, level="medium", proposer=analyst, approver=supervisor)
    for transition in steps:
        # Deciding/closing with no notice sent needs a confirmation; tests that are
        # about it call the service themselves.
        services.case_transition(actor=supervisor, case=case, transition=transition,
                                 reason=f"test step: {transition}",
                                 confirm_reason="test step: no notice" if transition in ("decide", "close") else "")
    case.refresh_from_db()
    assert case.status == status
    return case
