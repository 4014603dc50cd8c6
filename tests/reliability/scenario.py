"""Shared set-up and checks of the real-process tests (plain functions: the tests call them)."""

from __future__ import annotations

import re
from pathlib import Path

from audit.verify import verify_all
from cases import services as case_services
from cases.models import CaseEvent, Notice, NoticeDispatch, Proposal
from runs.models import AgentRun, RunStatus, Step, ToolCall
from tests.factories import make_case


def analysable_cases(analyst, count: int) -> list:
    cases = []
    for index in range(count):
        case = make_case(actor=analyst, title=f"Charged twice #{index}")
        case_services.case_transition(actor=analyst, case=case, transition="triage")
        cases.append(case)
    return cases


def approved_notices(analyst, supervisor, count: int) -> list[Notice]:
    notices = []
    for index in range(count):
        case = make_case(actor=analyst, title=f"Refund owed #{index}")
        notice = case_services.notice_draft(actor=analyst, case=case, subject=f"Your complaint #{index}",
                                            body="We are reviewing your complaint.")
        case_services.notice_submit(actor=analyst, notice=notice)
        case_services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
        notices.append(notice)
    return notices


def sent_message_ids(mail_folder: Path) -> list[str]:
    """Every Message-ID in the file email backend's output (one per email that went out)."""
    found = []
    for path in sorted(mail_folder.glob("*")):
        # A long Message-ID header is folded onto the next line ("Message-ID: \n <...>"): unfold it.
        found.extend(re.findall(r"^Message-ID:\s+(<[^>\s]+>)", path.read_text(errors="replace"), flags=re.MULTILINE))
    return found


def assert_every_run_complete_and_every_effect_once(runs: list[AgentRun]) -> None:
    for run in runs:
        run.refresh_from_db()
        assert run.status == RunStatus.COMPLETED, (run.pk, run.status, run.error)
        sequences = list(Step.objects.filter(run=run, status="completed").values_list("sequence", flat=True))
        assert len(sequences) == len(set(sequences)), f"R{run.pk} has a step committed twice"
        keys = list(ToolCall.objects.filter(run=run).values_list("idempotency_key", flat=True))
        assert len(keys) == len(set(keys))
        proposals = Proposal.objects.filter(run_id=str(run.pk))
        assert proposals.count() == len(set(proposals.values_list("idempotency_key", flat=True)))
        assert CaseEvent.objects.filter(case_id=run.case_id, event_type="notice.drafted").count() <= 1
        assert Notice.objects.filter(case_id=run.case_id).count() <= 1


def assert_each_notice_sent_once(notices: list[Notice], mail_folder: Path) -> None:
    ids = sent_message_ids(mail_folder)
    for notice in notices:
        notice.refresh_from_db()
        dispatch = NoticeDispatch.objects.get(notice=notice)
        assert (notice.status, dispatch.status, dispatch.attempts) == ("sent", "sent", 1), notice.pk
        assert ids.count(dispatch.message_id) == 1, (notice.pk, ids)


def assert_ledger_verifies() -> None:
    _count, breaks = verify_all()
    assert breaks == [], breaks
