"""Replaying a case's events rebuilds the stored case; `case_replay` reports any drift."""

from datetime import date

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from cases import services
from cases.models import Case, CaseEvent
from cases.reducer import REPLAYED_FIELDS, ReplayError, case_state, diff_case, reduce_events
from tests.audit.tampering import table_triggers_disabled
from tests.factories import make_case


def run_replay(*args):
    """call_command, returning (stdout, stderr) or raising CommandError with both attached."""
    from io import StringIO

    out, err = StringIO(), StringIO()
    try:
        call_command("case_replay", *args, stdout=out, stderr=err)
    except CommandError as exc:
        exc.stdout, exc.stderr = out.getvalue(), err.getvalue()
        raise
    return out.getvalue(), err.getvalue()


@pytest.fixture
def long_history_case(analyst, analyst_b, supervisor, supervisor_b, agent):
    """A realistic case: transitions both ways, risk and assignment proposals approved (and one
    rejected, one staled), evidence text and file, a notice edited, approved and sent, a decision,
    closing and reopening."""
    case = make_case(actor=analyst, received_at=date(2026, 3, 2), consumer_state="TX", tags="Servicemember")
    s = services
    s.case_transition(actor=analyst, case=case, transition="triage")
    p = s.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "medium"},
                          rationale="Servicemember complaint: at least medium (SCRA).")
    s.proposal_approve(actor=supervisor, proposal=p)
    p = s.proposal_create(actor=agent, case=case, kind="assignment",
                          payload={"team": "Cards", "assignee_id": analyst_b.pk}, rationale="Card team.")
    s.proposal_approve(actor=supervisor_b, proposal=p)
    rejected = s.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                 rationale="Small amount.")
    s.proposal_reject(actor=supervisor, proposal=rejected, note="SCRA applies.")
    s.case_transition(actor=analyst_b, case=case, transition="start_review")
    notice = s.notice_draft(actor=agent, case=case, subject="We are reviewing your complaint",
                            body="Dear consumer, we received your complaint.")
    s.notice_submit(actor=agent, notice=notice)
    s.notice_edit(actor=analyst_b, notice=notice, body="Dear consumer, we received your complaint on 2 March.")
    s.notice_submit(actor=analyst_b, notice=notice)
    s.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    s.notice_dispatch(actor=analyst_b, notice=notice)
    s.case_transition(actor=analyst_b, case=case, transition="request_evidence")
    s.evidence_add(actor=analyst_b, case=case, title="Statement",
                   upload=SimpleUploadedFile("s.csv", b"a,b\n1,2\n", content_type="text/csv"))
    stale = s.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "critical"},
                              rationale="Large loss.")
    s.case_transition(actor=analyst_b, case=case, transition="receive_evidence")  # leaves it pending (ADR 0006)
    p = s.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                          rationale="Loss above $1,000 (MONEY-LOSS).")
    s.proposal_approve(actor=supervisor, proposal=p)  # the risk change stales the "critical" proposal
    s.evidence_add(actor=analyst_b, case=case, title="Bank reply", text="We will not refund.")
    s.case_transition(actor=analyst_b, case=case, transition="mark_ready")
    s.case_transition(actor=supervisor, case=case, transition="return_to_review", reason="Check the dates.")
    p = s.proposal_create(actor=analyst_b, case=case, kind="status_transition",
                          payload={"transition": "mark_ready"}, rationale="Dates checked.")
    s.proposal_approve(actor=supervisor, proposal=p)
    p = s.proposal_create(actor=agent, case=case, kind="status_transition",
                          payload={"transition": "decide", "reason": "Refund the double charge."},
                          rationale="Two identical charges on the statement.")
    s.proposal_approve(actor=supervisor_b, proposal=p)
    s.case_transition(actor=supervisor, case=case, transition="close")
    s.case_transition(actor=supervisor_b, case=case, transition="reopen", reason="Consumer disputes the refund.")
    p = s.proposal_create(actor=analyst, case=case, kind="assignment", payload={"team": "Escalations",
                                                                                 "assignee_id": None},
                          rationale="Escalate.")
    s.proposal_approve(actor=supervisor, proposal=p)
    stale.refresh_from_db()
    assert stale.status == "stale"
    case.refresh_from_db()
    return case


def test_replaying_a_long_history_equals_the_stored_case(long_history_case):
    case = long_history_case
    assert case.events.count() >= 40
    assert set(case.events.values_list("event_type", flat=True)) == {
        "case.created", "case.transitioned", "case.risk_changed", "case.assigned", "evidence.added",
        "proposal.created", "proposal.approved", "proposal.rejected", "notice.drafted", "notice.submitted",
        "notice.edited", "notice.approved", "notice.sending", "notice.sent"}
    replayed = reduce_events(case.events.order_by("sequence"))
    assert replayed == case_state(case)
    assert (replayed["status"], replayed["risk_level"], replayed["assigned_team"], replayed["assignee_id"]) == (
        "under_review", "high", "Escalations", None)
    assert replayed["resolution"] == "Refund the double charge."
    assert diff_case(case) == {}


def test_case_replay_command_exits_zero_on_a_clean_case(long_history_case):
    case = long_history_case
    out, err = run_replay(case.reference)
    assert err == ""
    assert f"{case.reference} (acme): replayed {case.events.count()} events" in out
    assert "  status: 'under_review'" in out
    assert "  risk_level: 'high'" in out
    assert f"  version: {case.version}" in out
    assert f"OK: {case.reference} matches its event history." in out


def test_every_event_records_the_version_the_replay_reaches(long_history_case):
    state: dict = {}
    from cases.reducer import apply_event

    for event in long_history_case.events.order_by("sequence"):
        state = apply_event(state, event.event_type, event.payload)
        assert event.case_version == state["version"], event


@pytest.mark.parametrize(("field", "value"), [
    ("status", "closed"), ("risk_level", "critical"), ("assigned_team", "Nobody"), ("version", 99),
    ("title", "Rewritten title"), ("resolution", "Made up"),
])
def test_case_replay_reports_a_tampered_row(field, value, long_history_case):
    case = long_history_case
    stored_before = getattr(case, field)
    Case.objects.filter(pk=case.pk).update(**{field: value})
    with pytest.raises(CommandError) as failed:
        run_replay(case.reference)
    assert str(failed.value) == f"{case.reference} differs from its replay in 1 place(s)."
    assert f"DRIFT {case.reference}: {field}: stored {value!r}, replayed {stored_before!r}" in failed.value.stderr


def test_case_replay_reports_a_removed_event(case, analyst):
    services.case_transition(actor=analyst, case=case, transition="triage")
    services.case_transition(actor=analyst, case=case, transition="start_review")
    # Remove the triage event behind the services' back, as someone who can switch triggers off could.
    with table_triggers_disabled("cases_caseevent", "case events"):
        CaseEvent.objects.filter(case=case, event_type="case.transitioned", payload__transition="triage").delete()
    with pytest.raises(CommandError, match="differs from its replay"):
        run_replay(case.reference)


def test_case_replay_unknown_reference(tenant):
    with pytest.raises(CommandError, match=r"No case with reference 'CASE-2026-999999'\."):
        run_replay("CASE-2026-999999")
    with pytest.raises(CommandError, match="No tenant with slug 'nope'"):
        run_replay("CASE-2026-999999", "--tenant", "nope")


def test_case_replay_needs_tenant_when_a_reference_is_shared(analyst, outsider):
    mine = make_case(actor=analyst, received_at=date(2026, 1, 5))
    theirs = make_case(actor=outsider, received_at=date(2026, 1, 5))
    assert mine.reference == theirs.reference
    with pytest.raises(CommandError, match=r"exists in several tenants \(acme, other\); choose one with --tenant"):
        run_replay(mine.reference)
    out, _ = run_replay(mine.reference, "--tenant", "other")
    assert f"{theirs.reference} (other)" in out
    with pytest.raises(CommandError, match="in tenant 'acme'"):
        run_replay("CASE-2026-000777", "--tenant", "acme")


def test_case_replay_argument_errors(case):
    with pytest.raises(CommandError, match="Give either a case reference or --all"):
        run_replay()
    with pytest.raises(CommandError, match="Give either a case reference or --all"):
        run_replay(case.reference, "--all")


def test_case_replay_all(analyst, outsider):
    cases = [make_case(actor=analyst, title=f"Complaint {n}") for n in range(3)]
    make_case(actor=outsider)
    out, _ = run_replay("--all")
    assert "OK: 4 cases match their event history." in out
    out, _ = run_replay("--all", "--tenant", "acme")
    assert "OK: 3 cases match their event history." in out

    Case.objects.filter(pk=cases[1].pk).update(risk_level="low", version=42)
    with pytest.raises(CommandError) as failed:
        run_replay("--all")
    assert str(failed.value) == "1 of 4 cases differ from their replay."
    assert f"DRIFT {cases[1].reference} (acme): risk_level: stored 'low', replayed 'unassessed'" in (
        failed.value.stderr)
    assert f"DRIFT {cases[1].reference} (acme): version: stored 42" in failed.value.stderr
    out, _ = run_replay("--all", "--tenant", "other")
    assert "OK: 1 cases match" in out


def test_case_without_events_is_drift(tenant):
    case = Case.objects.create(tenant=tenant, reference="CASE-2026-000500", title="Imported by hand")
    with pytest.raises(CommandError) as failed:
        run_replay(case.reference)
    assert "no case.created event" in failed.value.stderr


def test_reducer_refuses_impossible_histories():
    created = ("case.created", {f: "" for f in REPLAYED_FIELDS} | {"status": "new"})
    with pytest.raises(ReplayError, match="before case.created"):
        reduce_events([("case.transitioned", {"transition": "triage", "source": "new", "target": "triaged"})])
    with pytest.raises(ReplayError, match="must be the first event"):
        reduce_events([created, created])
    with pytest.raises(ReplayError, match="from triaged but state is new"):
        reduce_events([created, ("case.transitioned", {"transition": "start_review", "source": "triaged",
                                                       "target": "under_review"})])


def test_reducer_ignores_unversioned_events_for_state():
    created = ("case.created", {f: "" for f in REPLAYED_FIELDS} | {"status": "new", "risk_level": "unassessed"})
    state = reduce_events([created, ("notice.drafted", {"notice_id": 1}), ("proposal.created", {})])
    assert state["version"] == 1
    state = reduce_events([created, ("evidence.added", {}), ("case.risk_changed", {"from": "unassessed",
                                                                                   "to": "low"})])
    assert (state["version"], state["risk_level"]) == (3, "low")
