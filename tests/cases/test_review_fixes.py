"""Defects found in review of the foundation, each pinned by a test."""

import pytest

from cases import services
from core.errors import Conflict, Forbidden
from tests.factories import make_case
from tests.helpers import assert_nothing_changed


def test_idempotency_key_reused_on_another_case_is_a_conflict(analyst, agent):
    first = make_case(actor=analyst)
    second = make_case(actor=analyst, title="Another complaint")
    services.proposal_create(actor=agent, case=first, kind="risk_level", payload={"risk_level": "high"},
                             rationale="fraud language", idempotency_key="run-1:3:propose-risk")
    with assert_nothing_changed(first, second), pytest.raises(Conflict, match="another case"):
        services.proposal_create(actor=agent, case=second, kind="risk_level", payload={"risk_level": "high"},
                                 rationale="fraud language", idempotency_key="run-1:3:propose-risk")


def test_notice_idempotency_key_reused_on_another_case_is_a_conflict(analyst, agent):
    first = make_case(actor=analyst)
    second = make_case(actor=analyst, title="Another complaint")
    services.notice_draft(actor=agent, case=first, subject="We received your complaint", body="Body",
                          idempotency_key="run-1:7:draft")
    with assert_nothing_changed(first, second), pytest.raises(Conflict):
        services.notice_draft(actor=agent, case=second, subject="We received your complaint", body="Body",
                              idempotency_key="run-1:7:draft")


def test_agent_rejecting_a_notice_without_a_note_is_forbidden_not_invalid(analyst, agent, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Acknowledgement", body="We have it.")
    services.notice_submit(actor=analyst, notice=notice)
    with assert_nothing_changed(case), pytest.raises(Forbidden):
        services.notice_reject(actor=agent, notice=notice, note="")


def test_an_earlier_editor_cannot_approve_after_someone_else_edits(analyst, supervisor, supervisor_b, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Acknowledgement", body="We have it.")
    services.notice_edit(actor=supervisor, notice=notice, body="We have received your complaint.")
    services.notice_edit(actor=analyst, notice=notice, body="We have received your complaint. Thank you.")
    services.notice_submit(actor=analyst, notice=notice)
    notice.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="four eyes"):
        services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    services.notice_approve(actor=supervisor_b, notice=notice, content_hash=notice.content_hash)
    notice.refresh_from_db()
    assert notice.status == "approved"


def test_who_asked_an_agent_for_a_proposal_cannot_approve_it(analyst, supervisor, supervisor_b, agent, case):
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="asked for in chat", requested_by=supervisor)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="at your request"):
        services.proposal_approve(actor=supervisor, proposal=proposal)
    services.proposal_approve(actor=supervisor_b, proposal=proposal)
    case.refresh_from_db()
    assert case.risk_level == "high"


def test_who_asked_an_agent_for_a_notice_cannot_approve_it(supervisor, supervisor_b, agent, case):
    notice = services.notice_draft(actor=agent, case=case, subject="Acknowledgement", body="We have it.",
                                   requested_by=supervisor)
    services.notice_submit(actor=agent, notice=notice)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="four eyes"):
        services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    services.notice_approve(actor=supervisor_b, notice=notice, content_hash=notice.content_hash)
