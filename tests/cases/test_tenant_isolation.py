"""Tenant isolation: every selector hides other tenants' rows, every service refuses an outsider
with NotFound and changes nothing (another tenant's object is a 404, not a 403)."""

import inspect
from datetime import date
from unittest import mock

import pytest

from audit import selectors as audit_selectors
from cases import selectors, services
from core.errors import NotFound
from tests.factories import make_case
from tests.helpers import assert_nothing_changed


@pytest.fixture
def world(case, analyst, supervisor, agent, outsider):
    """Two tenants with the same kinds of rows: a case with evidence, a pending proposal, a
    notice pending approval and audit events, in `acme` (ours) and `other` (the outsider's)."""

    def populate(owner, proposer):
        c = case if owner == analyst else make_case(actor=owner, title="Their complaint")
        proposal = services.proposal_create(actor=proposer, case=c, kind="risk_level",
                                            payload={"risk_level": "high"}, rationale="Loss.")
        notice = services.notice_draft(actor=proposer, case=c, subject="Hello", body="We are on it.")
        services.notice_submit(actor=proposer, notice=notice)
        return {"case": c, "evidence": c.evidence.get(), "proposal": proposal, "notice": notice}

    return {"ours": populate(analyst, agent), "theirs": populate(outsider, outsider)}


def test_every_case_selector_is_covered():
    """A new selector must be added to the isolation tests below."""
    public = {name for name, obj in inspect.getmembers(selectors, inspect.isfunction)
              if obj.__module__ == selectors.__name__ and not name.startswith("_")}
    assert public == {"case_list_for_user", "case_get_for_user", "evidence_list_for_case", "evidence_get_for_user",
                      "proposal_list_for_user", "proposal_get_for_user", "notice_list_for_user",
                      "notice_get_for_user", "review_inbox_for_user", "case_events_for_user",
                      "notice_earlier_versions_for", "deadline_rows_for_inbox"}
    audit_public = {name for name, obj in inspect.getmembers(audit_selectors, inspect.isfunction)
                    if obj.__module__ == audit_selectors.__name__}
    assert audit_public == {"audit_events_for_tenant", "audit_chain_status", "audit_latest_event_id"}


def test_list_selectors_return_only_the_users_tenant(world, analyst, outsider):
    ours, theirs = world["ours"], world["theirs"]
    for user, mine, foreign in ((analyst, ours, theirs), (outsider, theirs, ours)):
        assert list(selectors.case_list_for_user(user=user)) == [mine["case"]]
        # Both tenants' cases name the same company: the search still stays inside the tenant.
        assert list(selectors.case_list_for_user(user=user, search="Example Bank")) == [mine["case"]]
        assert list(selectors.case_list_for_user(user=user, status="new", risk_level="unassessed")) == [mine["case"]]
        assert foreign["case"] not in selectors.case_list_for_user(user=user, search=foreign["case"].reference)
        assert list(selectors.proposal_list_for_user(user=user)) == [mine["proposal"]]
        assert list(selectors.proposal_list_for_user(user=user, case=foreign["case"])) == []
        assert list(selectors.notice_list_for_user(user=user)) == [mine["notice"]]
        assert list(selectors.notice_list_for_user(user=user, case=foreign["case"])) == []
        assert list(selectors.evidence_list_for_case(user=user, case=mine["case"])) == [mine["evidence"]]
        assert list(selectors.evidence_list_for_case(user=user, case=foreign["case"])) == []
        assert selectors.case_events_for_user(user=user, case=mine["case"]).count() > 0
        assert list(selectors.case_events_for_user(user=user, case=foreign["case"])) == []
        inbox = selectors.review_inbox_for_user(user=user)
        assert list(inbox["proposals"]) == [mine["proposal"]]
        assert list(inbox["notices"]) == [mine["notice"]]



def test_the_lists_changed_since_token_is_the_tenants_own(world, analyst, outsider):
    from audit.models import AuditEvent

    for user in (analyst, outsider):
        own = AuditEvent.objects.filter(tenant_id=user.tenant_id, action__startswith="cases.").order_by("-id")
        token = audit_selectors.audit_latest_event_id(tenant_id=user.tenant_id, action_prefix="cases.")
        assert token == own.first().pk
    assert audit_selectors.audit_latest_event_id(tenant_id=analyst.tenant_id, action_prefix="cases.") != \
        audit_selectors.audit_latest_event_id(tenant_id=outsider.tenant_id, action_prefix="cases.")


def test_a_notice_s_earlier_versions_are_read_only_in_its_own_tenant(world, analyst, outsider):
    ours, theirs = world["ours"], world["theirs"]
    services.notice_edit(actor=analyst, notice=ours["notice"], body="Revised by us.")
    services.notice_edit(actor=outsider, notice=theirs["notice"], body="Revised by them.")
    for user, mine, foreign in ((analyst, ours, theirs), (outsider, theirs, ours)):
        assert selectors.notice_earlier_versions_for(user=user, notices=[foreign["notice"]]) == {}
        assert selectors.notice_earlier_versions_for(user=user, notices=[mine["notice"]])[mine["notice"].pk]["body"] \
            == "We are on it."


def test_inbox_deadlines_use_the_users_tenant_policy(world, analyst, outsider, other_tenant):
    """deadline_rows_for_inbox reads the due-soon window of the reader's tenant only."""
    from cases.models import DeadlinePolicy

    DeadlinePolicy.objects.filter(tenant=other_tenant).delete()
    DeadlinePolicy.objects.create(tenant=other_tenant, version=9, due_soon_days=60, created_by="test")
    for user, expected in ((analyst, 3), (outsider, 60)):
        items = list(selectors.review_inbox_for_user(user=user)["proposals"])
        with mock.patch("cases.deadlines.case_deadline_states", autospec=True, return_value=[]) as states:
            selectors.deadline_rows_for_inbox(user=user, items=items)
        assert [call.kwargs["due_soon_days"] for call in states.call_args_list] == [expected]


def test_case_list_counts_only_own_pending_proposals(world, analyst):
    listed = selectors.case_list_for_user(user=analyst).get()
    assert listed.pending_proposals == 1


def test_get_selectors_raise_not_found_for_other_tenants(world, analyst, outsider):
    ours, theirs = world["ours"], world["theirs"]
    for user, mine, foreign in ((analyst, ours, theirs), (outsider, theirs, ours)):
        assert selectors.case_get_for_user(user=user, reference=mine["case"].reference) == mine["case"]
        assert selectors.case_get_for_user(user=user, pk=mine["case"].pk) == mine["case"]
        assert selectors.evidence_get_for_user(user=user, pk=mine["evidence"].pk) == mine["evidence"]
        assert selectors.proposal_get_for_user(user=user, pk=mine["proposal"].pk) == mine["proposal"]
        assert selectors.notice_get_for_user(user=user, pk=mine["notice"].pk) == mine["notice"]
        lookups = [
            (selectors.case_get_for_user, {"pk": foreign["case"].pk}),
            (selectors.case_get_for_user, {"reference": f"{foreign['case'].reference}-x"}),
            (selectors.evidence_get_for_user, {"pk": foreign["evidence"].pk}),
            (selectors.proposal_get_for_user, {"pk": foreign["proposal"].pk}),
            (selectors.notice_get_for_user, {"pk": foreign["notice"].pk}),
            (selectors.case_get_for_user, {"pk": "not-a-number"}),
        ]
        for selector, kwargs in lookups:
            with pytest.raises(NotFound):
                selector(user=user, **kwargs)


def test_same_reference_in_two_tenants_resolves_per_tenant(analyst, outsider):
    from datetime import date

    mine = make_case(actor=analyst, received_at=date(2026, 4, 1))
    theirs = make_case(actor=outsider, received_at=date(2026, 4, 1))
    assert mine.reference == theirs.reference
    assert selectors.case_get_for_user(user=analyst, reference=mine.reference) == mine
    assert selectors.case_get_for_user(user=outsider, reference=mine.reference) == theirs


def test_a_user_without_a_tenant_sees_nothing(world, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    assert list(selectors.case_list_for_user(user=root)) == []
    with pytest.raises(NotFound):
        selectors.case_get_for_user(user=root, pk=world["ours"]["case"].pk)


def test_audit_selector_is_tenant_scoped(world, tenant, other_tenant):
    ours, theirs = world["ours"], world["theirs"]
    mine = audit_selectors.audit_events_for_tenant(tenant_id=tenant.pk)
    assert mine.exists()
    assert set(mine.values_list("tenant_id", flat=True)) == {tenant.pk}
    assert {e.stream for e in mine} == {f"case:{ours['case'].pk}"}
    assert not audit_selectors.audit_events_for_tenant(tenant_id=tenant.pk, case_id=theirs["case"].pk).exists()
    assert audit_selectors.audit_events_for_tenant(tenant_id=other_tenant.pk, case_id=theirs["case"].pk).exists()
    assert not audit_selectors.audit_events_for_tenant(tenant_id=other_tenant.pk, case_id=ours["case"].pk).exists()
    drafted = audit_selectors.audit_events_for_tenant(tenant_id=tenant.pk, action="cases.notice")
    assert set(drafted.values_list("action", flat=True)) == {"cases.notice.drafted", "cases.notice.submitted"}


def test_audit_chain_status_is_tenant_scoped(world, tenant, other_tenant):
    from audit.verify import verify_ledger

    verify_ledger(since=True)  # both tenants' streams get a verified head
    ours, theirs = f"case:{world['ours']['case'].pk}", f"case:{world['theirs']['case'].pk}"
    both = [ours, theirs, f"tenant:{other_tenant.pk}", "no-such-stream"]
    assert set(audit_selectors.audit_chain_status(tenant_id=tenant.pk, streams=both)) == {ours}
    assert set(audit_selectors.audit_chain_status(tenant_id=other_tenant.pk, streams=both)) == {theirs}
    status = audit_selectors.audit_chain_status(tenant_id=tenant.pk, streams=[ours])[ours]
    assert status.up_to_date and status.verified_at is not None and status.events == status.verified_sequence


def _outsider_calls(world, outsider, tenant):
    ours = world["ours"]
    case, proposal, notice = ours["case"], ours["proposal"], ours["notice"]
    return {
        "case_create": lambda: services.case_create(actor=outsider, tenant=tenant, title="Planted"),
        "evidence_add": lambda: services.evidence_add(actor=outsider, case=case, title="x", text="y"),
        "case_transition": lambda: services.case_transition(actor=outsider, case=case, transition="triage"),
        "case_take": lambda: services.case_take(actor=outsider, case=case),
        "proposal_create": lambda: services.proposal_create(actor=outsider, case=case, kind="risk_level",
                                                            payload={"risk_level": "low"}, rationale="r"),
        "proposal_approve": lambda: services.proposal_approve(actor=outsider, proposal=proposal),
        "proposal_reject": lambda: services.proposal_reject(actor=outsider, proposal=proposal, note="n"),
        "proposal_withdraw": lambda: services.proposal_withdraw(actor=outsider, proposal=proposal),
        "notice_draft": lambda: services.notice_draft(actor=outsider, case=case, subject="s", body="b"),
        "notice_edit": lambda: services.notice_edit(actor=outsider, notice=notice, body="b2"),
        "notice_submit": lambda: services.notice_submit(actor=outsider, notice=notice),
        "notice_approve": lambda: services.notice_approve(actor=outsider, notice=notice,
                                                          content_hash=notice.content_hash),
        "notice_reject": lambda: services.notice_reject(actor=outsider, notice=notice, note="n"),
        "notice_withdraw": lambda: services.notice_withdraw(actor=outsider, notice=notice),
        "notice_dispatch": lambda: services.notice_dispatch(actor=outsider, notice=notice),
        "notice_dispatch_request": lambda: services.notice_dispatch_request(actor=outsider, notice=notice),
        "case_deadline_extend": lambda: services.case_deadline_extend(
            actor=outsider, case=case, deadline="response", until=date(2099, 1, 1), reason="r"),
        "case_deadlines_recompute": lambda: services.case_deadlines_recompute(actor=outsider, case=case),
        "deadline_policy_create": lambda: services.deadline_policy_create(actor=outsider, tenant=tenant,
                                                                          response_days=20),
        "notice_settle": lambda: services.notice_settle(actor=outsider, notice=notice, outcome="failed",
                                                        reason="planted"),
    }


def test_every_service_is_covered():
    public = {name for name, obj in inspect.getmembers(services, inspect.isfunction)
              if obj.__module__.startswith(services.__name__ + ".") and not name.startswith("_")}
    covered = set(_outsider_calls({"ours": {"case": None, "proposal": None, "notice": None}}, None, None))
    assert public == covered, "add the new service to _outsider_calls so its tenant check is tested"


@pytest.mark.parametrize("service", sorted(_outsider_calls({"ours": {"case": None, "proposal": None,
                                                                     "notice": None}}, None, None)))
def test_every_service_refuses_an_outsider_with_not_found(service, world, outsider, tenant):
    call = _outsider_calls(world, outsider, tenant)[service]
    with assert_nothing_changed(world["ours"]["case"], world["theirs"]["case"]), pytest.raises(NotFound):
        call()
