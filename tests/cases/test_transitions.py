"""Every case transition, allowed and refused, per role."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import AuditEvent
from cases import policy, services
from cases.models import CASE_TRANSITIONS, Case, CaseEvent
from core.errors import Forbidden, Invalid, NotAllowed, NotFound
from tests.helpers import PATH_TO_STATUS, CountDelta, assert_nothing_changed, bring_case_to

# Written out here, independently of cases.policy, so that a change to the policy matrix fails
# these tests until someone decides it was intended.
TRANSITION_SOURCES = {
    "triage": ["new"],
    "start_review": ["triaged"],
    "request_evidence": ["under_review"],
    "receive_evidence": ["waiting_for_evidence"],
    "mark_ready": ["under_review"],
    "return_to_review": ["ready_for_decision"],
    "decide": ["ready_for_decision"],
    "close": ["decided"],
    "reopen": ["closed", "decided"],
}
TRANSITION_TARGET = {
    "triage": "triaged", "start_review": "under_review", "request_evidence": "waiting_for_evidence",
    "receive_evidence": "under_review", "mark_ready": "ready_for_decision", "return_to_review": "under_review",
    "decide": "decided", "close": "closed", "reopen": "under_review",
}
ALLOWED_BY_ROLE = {
    "analyst": {"triage", "start_review", "request_evidence", "receive_evidence", "mark_ready",
                "return_to_review"},
    "supervisor": set(TRANSITION_SOURCES),
    "auditor": set(),
    "admin": set(),
}
POSSIBLE_FROM = {  # with the risk assessed and no notice in flight
    "new": {"triage"},
    "triaged": {"start_review"},
    "under_review": {"request_evidence", "mark_ready"},
    "waiting_for_evidence": {"receive_evidence"},
    "ready_for_decision": {"return_to_review", "decide"},
    "decided": {"close", "reopen"},
    "closed": {"reopen"},
}
ALL_STATUSES = list(PATH_TO_STATUS)

SOURCE_CASES = [(name, source) for name, sources in TRANSITION_SOURCES.items() for source in sources]


def test_the_transition_list_covers_the_model():
    assert set(CASE_TRANSITIONS) == set(TRANSITION_SOURCES)


@pytest.fixture
def people(analyst, supervisor, auditor, admin_user):
    return {"analyst": analyst, "supervisor": supervisor, "auditor": auditor, "admin": admin_user}


@pytest.fixture
def ready_case(case, analyst, supervisor_b):
    """A case whose risk is assessed (by analyst + supervisor_b), still `new`."""
    from tests.helpers import assess_risk

    return assess_risk(case, level="high", proposer=analyst, approver=supervisor_b)


@pytest.mark.parametrize("role", ["analyst", "supervisor", "auditor", "admin"])
@pytest.mark.parametrize(("transition", "source"), SOURCE_CASES)
def test_transition_per_role(transition, source, role, people, ready_case, supervisor_b):
    case = bring_case_to(ready_case, source, supervisor=supervisor_b)
    actor = people[role]
    version = case.version
    if transition in ALLOWED_BY_ROLE[role]:
        with CountDelta() as delta:
            result = services.case_transition(actor=actor, case=case, transition=transition, reason="Because.",
                                              expected_version=version, confirm_reason="No notice: test.")
        assert result.status == TRANSITION_TARGET[transition]
        case.refresh_from_db()
        assert case.status == TRANSITION_TARGET[transition]
        assert case.version == version + 1
        assert (delta.case_events, delta.audit_events) == (1, 1)
        event = case.events.order_by("-sequence").first()
        assert event.event_type == "case.transitioned"
        assert event.payload["transition"] == transition
        assert (event.payload["source"], event.payload["target"]) == (source, TRANSITION_TARGET[transition])
        assert event.case_version == version + 1
        assert event.actor_id == f"user:{actor.pk}"
        assert event.policy_version == policy.POLICY_VERSION
        audit = AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("-sequence").first()
        assert (audit.action, audit.decision, audit.actor_id) == ("cases.case.transitioned", "allowed",
                                                                  f"user:{actor.pk}")
        assert audit.payload["case_version"] == version + 1
    else:
        with assert_nothing_changed(case), pytest.raises(Forbidden) as refused:
            services.case_transition(actor=actor, case=case, transition=transition, reason="Because.")
        assert f"Your role ({role})" in refused.value.message
        assert "this needs:" in refused.value.message


@pytest.mark.parametrize(("transition", "source"), SOURCE_CASES)
def test_agent_cannot_transition(transition, source, ready_case, supervisor_b, agent):
    case = bring_case_to(ready_case, source, supervisor=supervisor_b)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="Agents cannot"):
        services.case_transition(actor=agent, case=case, transition=transition, reason="The evidence says so.")


@pytest.mark.parametrize(("transition", "source"), SOURCE_CASES)
def test_outsider_gets_not_found(transition, source, ready_case, supervisor_b, outsider):
    case = bring_case_to(ready_case, source, supervisor=supervisor_b)
    with assert_nothing_changed(case), pytest.raises(NotFound):
        services.case_transition(actor=outsider, case=case, transition=transition, reason="Because.")


WRONG_STATE_CASES = [(name, status) for name in TRANSITION_SOURCES for status in ALL_STATUSES
                     if status not in TRANSITION_SOURCES[name]]


@pytest.mark.parametrize(("transition", "status"), WRONG_STATE_CASES)
def test_transition_from_wrong_state_names_what_is_possible(transition, status, ready_case, supervisor):
    case = bring_case_to(ready_case, status, supervisor=supervisor)
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        services.case_transition(actor=supervisor, case=case, transition=transition, reason="Because.")
    message = refused.value.message
    assert case.reference in message
    assert "cannot" in message
    possible = message.split("Possible now:")[1].strip().rstrip(".")
    assert set(possible.split(", ")) == POSSIBLE_FROM[status]


def test_full_lifecycle_with_evidence_loop_and_reopen(case, analyst, supervisor, supervisor_b):
    from tests.helpers import assess_risk

    assess_risk(case, level="low", proposer=analyst, approver=supervisor_b)
    steps = [
        (analyst, "triage", "triaged"),
        (analyst, "start_review", "under_review"),
        (analyst, "request_evidence", "waiting_for_evidence"),
        (analyst, "receive_evidence", "under_review"),
        (analyst, "request_evidence", "waiting_for_evidence"),
        (analyst, "receive_evidence", "under_review"),
        (analyst, "mark_ready", "ready_for_decision"),
        (analyst, "return_to_review", "under_review"),
        (analyst, "mark_ready", "ready_for_decision"),
        (supervisor, "decide", "decided"),
        (supervisor, "close", "closed"),
        (supervisor, "reopen", "under_review"),
        (analyst, "mark_ready", "ready_for_decision"),
        (supervisor, "decide", "decided"),
        (supervisor, "reopen", "under_review"),
    ]
    for actor, transition, target in steps:
        version = case.version
        services.case_transition(actor=actor, case=case, transition=transition, reason=f"reason for {transition}",
                                 confirm_reason="No notice in this test.")
        assert (case.status, case.version) == (target, version + 1)
    case.refresh_from_db()
    assert case.resolution == "reason for decide"
    transitions = list(case.events.filter(event_type="case.transitioned").values_list("payload__transition",
                                                                                      flat=True))
    assert transitions == [t for _, t, _ in steps]


@pytest.mark.parametrize("transition", ["reopen", "decide", "return_to_review"])
@pytest.mark.parametrize("reason", ["", "   "])
def test_transitions_that_need_a_reason_refuse_without_one(transition, reason, ready_case, supervisor):
    source = TRANSITION_SOURCES[transition][0]
    case = bring_case_to(ready_case, source, supervisor=supervisor)
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.case_transition(actor=supervisor, case=case, transition=transition, reason=reason)
    assert refused.value.fields == {"reason": ["A reason is required for this transition."]}
    assert "needs a reason" in refused.value.message


def test_reopen_from_closed_records_the_reason(ready_case, supervisor):
    case = bring_case_to(ready_case, "closed", supervisor=supervisor)
    services.case_transition(actor=supervisor, case=case, transition="reopen",
                             reason="The consumer sent new statements.")
    event = case.events.order_by("-sequence").first()
    assert event.payload == {"transition": "reopen", "source": "closed", "target": "under_review",
                             "reason": "The consumer sent new statements."}


def test_unknown_transition_is_invalid(case, supervisor):
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.case_transition(actor=supervisor, case=case, transition="delete_everything")
    assert refused.value.fields == {"transition": ["Unknown transition."]}


# --- conditions ------------------------------------------------------------------------------

def test_mark_ready_needs_risk_assessed(case, analyst, supervisor):
    case = bring_case_to(case, "under_review", supervisor=supervisor)
    assert case.risk_level == "unassessed"
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        services.case_transition(actor=analyst, case=case, transition="mark_ready")
    assert refused.value.message == (f"Cannot mark ready {case.reference} yet: the case's risk level must be "
                                     f"assessed first.")


def test_decide_needs_risk_assessed(ready_case, supervisor):
    case = bring_case_to(ready_case, "ready_for_decision", supervisor=supervisor)
    # Only reachable by going around the services: the condition is the FSM's last line of defence.
    Case.objects.filter(pk=case.pk).update(risk_level="unassessed")
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="risk level must be assessed"):
        services.case_transition(actor=supervisor, case=case, transition="decide", reason="Upheld.")


@pytest.mark.parametrize("notice_state", ["pending_approval", "approved", "failed"])
def test_close_refused_while_a_notice_is_in_flight(notice_state, ready_case, analyst, supervisor,
                                                   supervisor_b, settings):
    case = bring_case_to(ready_case, "decided", supervisor=supervisor)
    notice = services.notice_draft(actor=analyst, case=case, subject="Our decision", body="We upheld it.")
    services.notice_submit(actor=analyst, notice=notice)
    if notice_state in ("approved", "failed"):
        services.notice_approve(actor=supervisor_b, notice=notice, content_hash=notice.content_hash)
    if notice_state == "failed":
        settings.EMAIL_BACKEND = "tests.cases.test_notices.UnreachableSmtpBackend"
        services.notice_dispatch(actor=analyst, notice=notice)
    assert notice.status == notice_state
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        services.case_transition(actor=supervisor, case=case, transition="close")
    assert "no notice may be awaiting approval or being sent" in refused.value.message


def test_close_allowed_once_the_notice_is_sent(ready_case, analyst, supervisor, supervisor_b):
    case = bring_case_to(ready_case, "decided", supervisor=supervisor)
    notice = services.notice_draft(actor=analyst, case=case, subject="Our decision", body="We upheld it.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor_b, notice=notice, content_hash=notice.content_hash)
    services.notice_dispatch(actor=analyst, notice=notice)
    case.refresh_from_db()
    services.case_transition(actor=supervisor, case=case, transition="close")
    assert case.status == "closed"


def test_stale_expected_version_is_a_conflict(case, analyst):
    from core.errors import Conflict

    version = case.version
    services.case_transition(actor=analyst, case=case, transition="triage", expected_version=version)
    with assert_nothing_changed(case), pytest.raises(Conflict) as refused:
        services.case_transition(actor=analyst, case=case, transition="start_review", expected_version=version)
    assert refused.value.message == (f"{case.reference} changed while you were looking at it (you saw version "
                                     f"{version}, it is now version {version + 1}). Reload the case and try "
                                     f"again.")


# --- the status field itself -------------------------------------------------------------------

def test_status_cannot_be_assigned_directly(case):
    with pytest.raises(AttributeError, match="Direct status modification is not allowed"):
        case.status = "closed"
    case.refresh_from_db()
    assert case.status == "new"


def test_a_loaded_case_cannot_have_its_status_assigned(case):
    fresh = Case.objects.get(pk=case.pk)
    with pytest.raises(AttributeError):
        fresh.status = "decided"


def test_queryset_update_bypass_is_caught_by_case_replay(case, analyst, capsys):
    services.case_transition(actor=analyst, case=case, transition="triage")
    events_before = CaseEvent.objects.filter(case=case).count()
    Case.objects.filter(pk=case.pk).update(status="closed")  # bypasses the FSM and the services
    assert CaseEvent.objects.filter(case=case).count() == events_before
    with pytest.raises(CommandError, match=f"{case.reference}.*differs"):
        call_command("case_replay", case.reference)
    out = capsys.readouterr()
    assert "status: stored 'closed', replayed 'triaged'" in out.out + out.err
