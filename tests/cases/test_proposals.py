"""Proposals: agents and people propose, a different supervisor decides (four eyes)."""

import pytest

from accounts.models import Role
from audit.models import AuditEvent
from cases import policy, services
from cases.models import Approval, Case, Proposal
from core.errors import Conflict, Forbidden, Invalid, NotAllowed, NotFound, Stale
from tests.factories import UserFactory, make_case
from tests.helpers import CountDelta, assert_nothing_changed, bring_case_to


def propose_risk(actor, case, level="high", **kwargs):
    return services.proposal_create(actor=actor, case=case, kind="risk_level", payload={"risk_level": level},
                                    rationale="The consumer lost more than $1,000.", **kwargs)


# --- creating ------------------------------------------------------------------------------

def test_agent_proposal_changes_nothing_in_the_domain(case, agent):
    version = case.version
    with CountDelta() as delta:
        proposal = propose_risk(agent, case, run_id="run-17")
    case.refresh_from_db()
    assert (case.risk_level, case.version) == ("unassessed", version)
    assert (proposal.status, proposal.case_version, proposal.proposer_type, proposal.proposer_id) == (
        "pending", version, "agent", "agent:risk_assessor@1.0")
    assert proposal.proposed_by_user is None
    assert proposal.policy_version == policy.POLICY_VERSION
    assert (delta.proposals, delta.case_events, delta.audit_events) == (1, 1, 1)
    event = case.events.order_by("-sequence").first()
    assert (event.event_type, event.run_id, event.case_version) == ("proposal.created", "run-17", version)
    audit = AuditEvent.objects.get(action="cases.proposal.created")
    assert (audit.target_type, audit.target_id, audit.actor_type) == ("proposal", str(proposal.pk), "agent")


@pytest.mark.parametrize("role", [Role.AUDITOR, Role.ADMIN])
def test_roles_without_propose_right_are_refused(role, case, tenant):
    user = UserFactory(username=f"{role}-x", tenant=tenant, role=role)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="cannot make proposals"):
        propose_risk(user, case)


def test_outsider_cannot_propose(case, outsider):
    with assert_nothing_changed(case), pytest.raises(NotFound):
        propose_risk(outsider, case)


def test_rationale_is_required(case, agent):
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                 rationale="  ")
    assert refused.value.fields == {"rationale": ["Explain why."]}


def test_idempotency_key_returns_the_same_proposal(case, agent):
    first = propose_risk(agent, case, idempotency_key="run-1:step-2:propose")
    with CountDelta() as delta:
        second = propose_risk(agent, case, idempotency_key="run-1:step-2:propose")
    assert second.pk == first.pk
    assert (delta.proposals, delta.case_events, delta.audit_events) == (0, 0, 0)
    assert Proposal.objects.filter(idempotency_key="run-1:step-2:propose").count() == 1


@pytest.fixture
def other_case(analyst):
    return make_case(actor=analyst, title="Another complaint")


@pytest.fixture
def foreign_user(other_tenant):
    return UserFactory(username="foreign-analyst", tenant=other_tenant, role=Role.ANALYST)


INVALID_PAYLOADS = [
    ("status_transition", {"transition": "explode"}, "payload", "Unknown transition 'explode'"),
    ("risk_level", {"risk_level": "extreme"}, "payload", "Unknown risk level 'extreme'"),
    ("risk_level", {"risk_level": "unassessed"}, "payload", "Unknown risk level 'unassessed'"),
    ("risk_level", {}, "payload", "Unknown risk level None"),
    ("assignment", {}, "payload", "An assignment needs a team or an assignee."),
    ("assignment", {"team": "  "}, "payload", "An assignment needs a team or an assignee."),
    ("telepathy", {}, "kind", "Unknown proposal kind 'telepathy'."),
]


@pytest.mark.parametrize(("kind", "payload", "field", "message"), INVALID_PAYLOADS)
def test_invalid_payload_is_refused_with_fields(kind, payload, field, message, case, agent):
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.proposal_create(actor=agent, case=case, kind=kind, payload=payload, rationale="Because.")
    assert message in refused.value.fields[field][0]
    assert refused.value.message == "The proposal was not created."


def test_a_transition_the_status_does_not_allow_is_a_state_refusal(case, agent):
    """The same body is right for a case in another status: 409 not_allowed, not 400 invalid."""
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        services.proposal_create(actor=agent, case=case, kind="status_transition", payload={"transition": "close"},
                                 rationale="Because.")
    assert "close is not possible from there" in refused.value.fields["payload"][0]


def test_same_risk_level_is_refused(case, analyst, supervisor):
    propose = propose_risk(analyst, case, "medium")
    services.proposal_approve(actor=supervisor, proposal=propose)
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        propose_risk(analyst, case, "medium")
    assert refused.value.fields == {"payload": ["The risk level is already medium."]}


def test_evidence_of_another_case_is_refused(case, other_case, agent):
    foreign_evidence = other_case.evidence.get()
    own_evidence = case.evidence.get()
    with assert_nothing_changed(case, other_case), pytest.raises(NotAllowed) as refused:
        propose_risk(agent, case, evidence_refs=[own_evidence.pk, foreign_evidence.pk])
    assert refused.value.fields == {"evidence_refs": ["Every evidence reference must be evidence of this case."]}
    with assert_nothing_changed(case), pytest.raises(Invalid):
        propose_risk(agent, case, evidence_refs=["E1; DROP TABLE"])
    proposal = propose_risk(agent, case, evidence_refs=[own_evidence.pk])
    assert proposal.evidence_refs == [own_evidence.pk]


def test_assignee_from_another_tenant_is_refused(case, agent, foreign_user):
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        services.proposal_create(actor=agent, case=case, kind="assignment",
                                 payload={"team": "Cards", "assignee_id": foreign_user.pk}, rationale="Load.")
    assert refused.value.fields == {"payload": ["The assignee is not an active user of this tenant."]}


def test_inactive_assignee_is_refused(case, agent, tenant):
    retired = UserFactory(username="retired", tenant=tenant, role=Role.ANALYST, is_active=False)
    with assert_nothing_changed(case), pytest.raises(NotAllowed):
        services.proposal_create(actor=agent, case=case, kind="assignment",
                                 payload={"assignee_id": retired.pk}, rationale="Load.")


# --- approving ---------------------------------------------------------------------------------

def test_approval_applies_the_change_in_the_same_transaction(case, agent, supervisor):
    proposal = propose_risk(agent, case, "critical", run_id="run-9")
    version = case.version
    with CountDelta() as delta:
        result = services.proposal_approve(actor=supervisor, proposal=proposal, note="Checked the statements.")
    case.refresh_from_db()
    assert (case.risk_level, case.version) == ("critical", version + 1)
    assert result.status == "applied"
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by, proposal.decision_note) == ("applied", supervisor,
                                                                               "Checked the statements.")
    approval = Approval.objects.get(proposal=proposal)
    assert (approval.decision, approval.approver, approval.case_version, approval.policy_version) == (
        "approved", supervisor, version, policy.POLICY_VERSION)
    assert approval.notice is None
    assert (delta.approvals, delta.case_events, delta.audit_events) == (1, 2, 2)
    events = list(case.events.order_by("-sequence")[:2])
    assert [e.event_type for e in events] == ["case.risk_changed", "proposal.approved"]
    assert events[0].payload == {"from": "unassessed", "to": "critical", "proposal_id": proposal.pk}
    assert events[0].run_id == "run-9"
    actions = list(AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("-sequence")
                   .values_list("action", "actor_id")[:2])
    assert actions == [("cases.case.risk_changed", f"user:{supervisor.pk}"),
                       ("cases.proposal.approved", f"user:{supervisor.pk}")]


def test_approved_transition_goes_through_the_fsm(case, agent, supervisor):
    proposal = services.proposal_create(actor=agent, case=case, kind="status_transition",
                                        payload={"transition": "triage"}, rationale="Complete complaint.")
    services.proposal_approve(actor=supervisor, proposal=proposal)
    case.refresh_from_db()
    assert case.status == "triaged"
    event = case.events.order_by("-sequence").first()
    assert event.payload["proposal_id"] == proposal.pk
    assert event.payload["reason"] == "Complete complaint."  # the rationale is the recorded reason


def test_approved_transition_whose_condition_fails_changes_nothing(case, agent, supervisor):
    bring_case_to(case, "under_review", supervisor=supervisor)
    proposal = services.proposal_create(actor=agent, case=case, kind="status_transition",
                                        payload={"transition": "mark_ready"}, rationale="Looks done.")
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="risk level must be assessed"):
        services.proposal_approve(actor=supervisor, proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_approving_needs_the_role_for_the_transition_itself(case, agent, supervisor, tenant):
    """decide is a supervisor transition; approving its proposal applies it as the approver."""
    bring_case_to(case, "ready_for_decision", supervisor=supervisor,
                  analyst=UserFactory(username="a2", tenant=tenant, role=Role.ANALYST))
    proposal = services.proposal_create(actor=agent, case=case, kind="status_transition",
                                        payload={"transition": "decide", "reason": "Refund owed."},
                                        rationale="The statements show a double charge.")
    services.proposal_approve(actor=supervisor, proposal=proposal, confirm_reason="Notice goes with the decision.")
    case.refresh_from_db()
    assert (case.status, case.resolution) == ("decided", "Refund owed.")


def test_assignment_proposal_applied(case, agent, supervisor, analyst_b):
    proposal = services.proposal_create(actor=agent, case=case, kind="assignment",
                                        payload={"team": "Credit cards", "assignee_id": analyst_b.pk},
                                        rationale="Card specialist.")
    services.proposal_approve(actor=supervisor, proposal=proposal)
    case.refresh_from_db()
    assert (case.assigned_team, case.assignee) == ("Credit cards", analyst_b)


def test_agent_cannot_approve(case, analyst, agent):
    proposal = propose_risk(analyst, case)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="Agents cannot approve proposals"):
        services.proposal_approve(actor=agent, proposal=proposal)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="Agents cannot reject proposals"):
        services.proposal_reject(actor=agent, proposal=proposal, note="No.")


@pytest.mark.parametrize("who", ["auditor", "analyst_b", "admin_user"])
def test_non_supervisors_cannot_approve_or_reject(who, request, case, agent):
    user = request.getfixturevalue(who)
    proposal = propose_risk(agent, case)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match=r"cannot approve proposals; this needs: "
                                                                      r"supervisor"):
        services.proposal_approve(actor=user, proposal=proposal)
    with assert_nothing_changed(case), pytest.raises(Forbidden):
        services.proposal_reject(actor=user, proposal=proposal, note="No.")


def test_proposer_cannot_approve_or_reject_their_own(case, supervisor):
    proposal = propose_risk(supervisor, case)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="four eyes"):
        services.proposal_approve(actor=supervisor, proposal=proposal)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="four eyes"):
        services.proposal_reject(actor=supervisor, proposal=proposal, note="Changed my mind.")


def test_another_supervisor_can_approve(case, supervisor, supervisor_b):
    proposal = propose_risk(supervisor, case)
    services.proposal_approve(actor=supervisor_b, proposal=proposal)
    case.refresh_from_db()
    assert case.risk_level == "high"


def test_outsider_cannot_decide(case, agent, outsider):
    proposal = propose_risk(agent, case)
    for call in (lambda: services.proposal_approve(actor=outsider, proposal=proposal),
                 lambda: services.proposal_reject(actor=outsider, proposal=proposal, note="No."),
                 lambda: services.proposal_withdraw(actor=outsider, proposal=proposal)):
        with assert_nothing_changed(case), pytest.raises(NotFound):
            call()


def test_already_decided_proposal_is_not_allowed(case, agent, supervisor, supervisor_b):
    proposal = propose_risk(agent, case)
    services.proposal_reject(actor=supervisor, proposal=proposal, note="Not supported by the evidence.")
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="already rejected"):
        services.proposal_approve(actor=supervisor_b, proposal=proposal)


# --- staleness by precondition (ADR 0006) -------------------------------------------------

def propose_transition(actor, case, name, **kwargs):
    return services.proposal_create(actor=actor, case=case, kind="status_transition", payload={"transition": name},
                                    rationale=f"Next step: {name}.", **kwargs)


def test_a_proposal_records_the_fields_it_depends_on(case, agent, analyst, supervisor):
    risk = propose_risk(agent, case)
    transition = propose_transition(agent, case, "triage")
    assign = services.proposal_create(actor=agent, case=case, kind="assignment", payload={"team": "Fraud"},
                                      rationale="Fraud team handles identity theft.")
    assert risk.preconditions == {"risk_level": "unassessed"}
    assert transition.preconditions == {"status": "new"}
    assert assign.preconditions == {"assigned_team": "", "assignee_id": None}


def test_sibling_proposals_from_one_run_are_approved_in_turn(case, agent, analyst, supervisor):
    bring_case_to(case, "triaged", supervisor=supervisor)
    risk = propose_risk(agent, case, "high", run_id="run-9")
    review = propose_transition(agent, case, "start_review", run_id="run-9")
    services.proposal_approve(actor=supervisor, proposal=risk)
    review.refresh_from_db()
    assert review.status == "pending"  # the risk change does not touch its precondition (status)
    services.proposal_approve(actor=supervisor, proposal=review)
    case.refresh_from_db()
    risk.refresh_from_db()
    review.refresh_from_db()
    assert (risk.status, review.status) == ("applied", "applied")
    assert (case.risk_level, case.status) == ("high", "under_review")
    assert not AuditEvent.objects.filter(action="cases.proposal.staled").exists()


def test_a_conflicting_sibling_goes_stale_naming_the_field_and_the_event(case, agent, analyst, supervisor):
    first = propose_risk(agent, case, "high")
    rival = propose_risk(analyst, case, "critical")
    services.proposal_approve(actor=supervisor, proposal=first)
    changed_by = case.events.get(event_type="case.risk_changed")
    rival.refresh_from_db()
    assert rival.status == "stale"
    assert rival.stale_reason == {"field": "risk_level", "from": "unassessed", "to": "high",
                                  "event_id": changed_by.pk, "event_sequence": changed_by.sequence,
                                  "event_type": "case.risk_changed", "actor_id": f"user:{supervisor.pk}"}
    staled = AuditEvent.objects.get(action="cases.proposal.staled")
    assert (staled.target_id, staled.decision, staled.stream) == (str(rival.pk), "stale", f"case:{case.pk}")
    assert staled.payload["field"] == "risk_level" and staled.payload["event_id"] == changed_by.pk

    with assert_nothing_changed(case), pytest.raises(Stale) as refused:
        services.proposal_approve(actor=supervisor, proposal=rival)
    assert refused.value.message == (
        f"This proposal is stale: The risk level changed from unassessed to high by event "
        f"#{changed_by.sequence} (case.risk_changed) after this proposal was made; it assumed unassessed. "
        f"It can no longer be approved — ask the agents again or make a fresh proposal.")
    assert refused.value.context["field"] == "risk_level"
    with assert_nothing_changed(case), pytest.raises(Stale, match="can no longer be rejected"):
        services.proposal_reject(actor=supervisor, proposal=rival, note="No.")


def test_a_transition_whose_source_state_moved_goes_stale(case, agent, analyst, supervisor):
    proposal = propose_transition(agent, case, "triage")
    services.case_transition(actor=analyst, case=case, transition="triage")
    proposal.refresh_from_db()
    assert (proposal.status, proposal.stale_reason["field"], proposal.stale_reason["from"],
            proposal.stale_reason["to"]) == ("stale", "status", "new", "triaged")
    with assert_nothing_changed(case), pytest.raises(Stale, match="status changed from new to triaged"):
        services.proposal_approve(actor=supervisor, proposal=proposal)


def test_a_change_to_another_field_leaves_a_proposal_pending(case, agent, analyst, supervisor):
    """The old rule (every versioned event stales every pending proposal) is gone."""
    proposal = propose_risk(agent, case)
    services.case_transition(actor=analyst, case=case, transition="triage")
    proposal.refresh_from_db()
    assert proposal.status == "pending"
    services.proposal_approve(actor=supervisor, proposal=proposal)
    case.refresh_from_db()
    assert case.risk_level == "high"


def test_a_changed_precondition_not_yet_marked_is_still_refused(case, agent, supervisor):
    """Belt and braces: approval compares the preconditions itself."""
    proposal = propose_risk(agent, case)
    Case.objects.filter(pk=case.pk).update(risk_level="low")
    with assert_nothing_changed(case), pytest.raises(Stale, match="risk level changed from unassessed to low"):
        services.proposal_approve(actor=supervisor, proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.status == "pending"


def test_evidence_added_does_not_stale_and_the_approval_records_the_evidence_in_view(case, agent, analyst,
                                                                                     supervisor):
    proposal = propose_risk(agent, case)
    before = list(case.evidence.values_list("pk", flat=True))
    added = services.evidence_add(actor=analyst, case=case, title="Bank letter", text="We refunded $20.")
    proposal.refresh_from_db()
    assert proposal.status == "pending"
    case.refresh_from_db()
    services.proposal_approve(actor=supervisor, proposal=proposal, expected_version=case.version,
                              evidence_seen=[*before, added.pk])
    approval = Approval.objects.get(proposal=proposal)
    assert approval.evidence_in_view == sorted([*before, added.pk])
    audit = AuditEvent.objects.get(action="cases.proposal.approved")
    assert audit.payload["evidence_in_view"] == sorted([*before, added.pk])


def test_approval_without_a_list_records_the_evidence_on_the_case(case, agent, supervisor):
    proposal = propose_risk(agent, case)
    services.proposal_approve(actor=supervisor, proposal=proposal)
    assert Approval.objects.get(proposal=proposal).evidence_in_view == list(
        case.evidence.order_by("pk").values_list("pk", flat=True))


def test_evidence_in_view_must_be_this_cases(case, agent, analyst, supervisor):
    other = make_case(actor=analyst, title="Another case", narrative="Another narrative.")
    foreign = other.evidence.first()
    proposal = propose_risk(agent, case)
    with assert_nothing_changed(case), pytest.raises(Invalid, match="evidence in view"):
        services.proposal_approve(actor=supervisor, proposal=proposal, evidence_seen=[foreign.pk])


def test_a_change_while_the_approver_looked_is_a_conflict(case, agent, analyst, supervisor):
    proposal = propose_risk(agent, case)
    seen = case.version
    services.evidence_add(actor=analyst, case=case, title="Late letter", text="Another page.")
    with assert_nothing_changed(case), pytest.raises(Conflict, match=f"you saw version {seen}"):
        services.proposal_approve(actor=supervisor, proposal=proposal, expected_version=seen)


# --- decided and closed cases --------------------------------------------------------

@pytest.mark.parametrize("status", ["decided", "closed"])
def test_a_settled_case_refuses_risk_and_assignment_proposals(status, case, agent, analyst, supervisor):
    bring_case_to(case, status, supervisor=supervisor, analyst=analyst)
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="Reopen the case first"):
        propose_risk(agent, case, "critical")
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="Reopen the case first"):
        services.proposal_create(actor=analyst, case=case, kind="assignment", payload={"team": "Fraud"},
                                 rationale="Move it.")


def test_a_pending_risk_proposal_cannot_be_applied_once_the_case_is_closed(case, agent, analyst, supervisor):
    bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    case.refresh_from_db()
    Case.objects.filter(pk=case.pk).update(status="ready_for_decision")  # proposed before the decision
    case.refresh_from_db()
    proposal = propose_risk(agent, case, "critical")
    Case.objects.filter(pk=case.pk).update(status="closed")
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="closed: its risk level can no longer"):
        services.proposal_approve(actor=supervisor, proposal=proposal)


def test_only_reopen_is_possible_on_a_closed_case(case, agent, analyst, supervisor):
    bring_case_to(case, "closed", supervisor=supervisor, analyst=analyst)
    case.refresh_from_db()
    with assert_nothing_changed(case), pytest.raises(NotAllowed) as refused:
        propose_transition(agent, case, "start_review")
    assert "start_review is not possible from there" in refused.value.fields["payload"][0]
    reopen = services.proposal_create(actor=analyst, case=case, kind="status_transition",
                                      payload={"transition": "reopen", "reason": "New facts."}, rationale="New facts.")
    assert reopen.status == "pending"


# --- migration of pending proposals ----------------------------------------------------------------

def test_the_migration_fills_preconditions_from_the_case_at_creation(case, agent, analyst, supervisor):
    from importlib import import_module

    from django.apps import apps

    proposal = propose_transition(agent, case, "triage")
    services.proposal_approve(actor=supervisor, proposal=propose_risk(agent, case, "low"))
    Proposal.objects.filter(pk=proposal.pk).update(preconditions={})
    import_module("cases.migrations.0005_fill_pending_proposal_preconditions").fill(apps, None)
    proposal.refresh_from_db()
    assert proposal.preconditions == {"status": "new"}


# --- rejecting and withdrawing ------------------------------------------------------------

def test_reject_needs_a_note(case, agent, supervisor):
    proposal = propose_risk(agent, case)
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.proposal_reject(actor=supervisor, proposal=proposal, note=" ")
    assert refused.value.fields == {"note": ["A reason is required."]}


def test_reject_records_the_decision(case, agent, supervisor):
    proposal = propose_risk(agent, case)
    version = case.version
    with CountDelta() as delta:
        services.proposal_reject(actor=supervisor, proposal=proposal, note="Loss is $12.")
    case.refresh_from_db()
    assert (case.risk_level, case.version) == ("unassessed", version)
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decision_note) == ("rejected", "Loss is $12.")
    approval = Approval.objects.get(proposal=proposal)
    assert (approval.decision, approval.note) == ("rejected", "Loss is $12.")
    assert (delta.approvals, delta.case_events, delta.audit_events) == (1, 1, 1)
    assert AuditEvent.objects.filter(action="cases.proposal.rejected", decision="rejected").count() == 1


def test_withdraw_by_proposer_or_supervisor_only(case, analyst, analyst_b, supervisor):
    proposal = propose_risk(analyst, case)
    with assert_nothing_changed(case), pytest.raises(Forbidden, match="Only the proposer or a supervisor"):
        services.proposal_withdraw(actor=analyst_b, proposal=proposal)
    services.proposal_withdraw(actor=analyst, proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.status == "withdrawn"
    other = propose_risk(analyst, case, "low")
    services.proposal_withdraw(actor=supervisor, proposal=other)
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="already withdrawn"):
        services.proposal_withdraw(actor=supervisor, proposal=other)


def test_agent_cannot_withdraw(case, agent):
    proposal = propose_risk(agent, case)
    with assert_nothing_changed(case), pytest.raises(Forbidden):
        services.proposal_withdraw(actor=agent, proposal=proposal)


def test_proposal_status_is_protected(case, agent):
    proposal = propose_risk(agent, case)
    with pytest.raises(AttributeError):
        proposal.status = "applied"
