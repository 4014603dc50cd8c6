"""Deadlines as domain data: policy, intake, business days, pause, extension,
recompute, states, crossings recorded once, confirmation to decide without a notice, replay."""

from datetime import date, timedelta
from unittest import mock

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit.models import AuditEvent
from cases import services
from cases.deadlines import DUE_SOON, MET, ON_TIME, OVERDUE, add_days, case_deadline_states
from cases.models import Case, CaseEvent, DeadlineCrossing, DeadlinePolicy
from cases.reducer import diff_case
from cases.services.deadlines import deadline_crossings_record
from core.errors import Forbidden, Invalid, NotAllowed
from tests.factories import make_case
from tests.helpers import CountDelta, assert_nothing_changed, bring_case_to


def on(day: date):
    """Freeze "today" for the deadline services and the state computation."""
    return mock.patch.object(timezone, "localdate", return_value=day)


def test_intake_stores_cfpb_default_due_dates_with_the_policy_version(analyst):
    case = make_case(actor=analyst, received_at=date(2026, 3, 2))
    assert (case.acknowledge_due, case.response_due, case.close_due) == (
        date(2026, 3, 17), date(2026, 3, 17), date(2026, 5, 1))
    policy = DeadlinePolicy.objects.get(tenant=case.tenant)
    assert (policy.version, policy.response_days, policy.close_days) == (1, 15, 60)
    assert case.deadline_policy_version == 1
    created = case.events.get(event_type="case.created")
    assert (created.payload["response_due"], created.payload["close_due"]) == ("2026-03-17", "2026-05-01")


def test_business_days_skip_weekends_and_public_holidays(supervisor, analyst, tenant):
    services.deadline_policy_create(actor=supervisor, tenant=tenant, response_days=10, response_day_count="business",
                                    country="US")
    # Received Monday 21 December 2026: Christmas (Fri 25th) and New Year (Fri 1st) are skipped.
    case = make_case(actor=analyst, received_at=date(2026, 12, 21))
    assert case.response_due == date(2027, 1, 6)
    assert case.deadline_policy_version == 2
    assert add_days(date(2026, 12, 21), 10, business=False) == date(2026, 12, 31)


def test_a_policy_change_recomputes_open_cases_and_is_audited(supervisor, analyst, tenant):
    open_case = make_case(actor=analyst, received_at=date(2026, 3, 2))
    settled = make_case(actor=analyst, title="Settled", received_at=date(2026, 3, 2))
    bring_case_to(settled, "closed", supervisor=supervisor, analyst=analyst)
    settled_due = settled.close_due
    services.deadline_policy_create(actor=supervisor, tenant=tenant, close_days=30)
    open_case.refresh_from_db()
    settled.refresh_from_db()
    assert (open_case.close_due, open_case.deadline_policy_version) == (date(2026, 4, 1), 2)
    assert settled.close_due == settled_due
    event = open_case.events.get(event_type="case.deadlines_changed")
    assert (event.payload["cause"], event.payload["close_due"], event.payload["previous"]["close_due"]) == (
        "policy", "2026-04-01", "2026-05-01")
    assert AuditEvent.objects.filter(action="cases.deadline_policy.created").count() == 1
    assert diff_case(open_case) == {}


def test_policy_refusals_change_nothing(analyst, supervisor, tenant, case):
    with assert_nothing_changed(case), pytest.raises(Forbidden):
        services.deadline_policy_create(actor=analyst, tenant=tenant, response_days=20)
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.deadline_policy_create(actor=supervisor, tenant=tenant, response_days=0, country="ZZ")
    assert set(refused.value.fields) == {"response_days", "country"}
    assert DeadlinePolicy.objects.filter(tenant=tenant).count() == 1
    with pytest.raises(ValueError, match="versioned"):
        policy = DeadlinePolicy.objects.get(tenant=tenant)
        policy.response_days = 20
        policy.save()


def test_pause_while_waiting_for_evidence_and_extension_are_replayed(supervisor, analyst, tenant):
    services.deadline_policy_create(actor=supervisor, tenant=tenant, pause_while_waiting_for_evidence=True)
    with on(date(2026, 3, 2)):
        case = make_case(actor=analyst, received_at=date(2026, 3, 2))
        bring_case_to(case, "waiting_for_evidence", supervisor=supervisor)
    case.refresh_from_db()
    assert case.deadline_paused_on == date(2026, 3, 2)
    with on(date(2026, 3, 9)):
        services.case_transition(actor=analyst, case=case, transition="receive_evidence")
    case.refresh_from_db()
    assert case.deadline_paused_on is None
    assert (case.response_due, case.close_due) == (date(2026, 3, 24), date(2026, 5, 8))  # +7 days
    resumed = case.events.filter(event_type="case.deadlines_changed").last()
    assert (resumed.payload["cause"], resumed.payload["paused_days"]) == ("resume", 7)

    services.case_deadline_extend(actor=supervisor, case=case, deadline="close", until=date(2026, 6, 1),
                                  reason="Consumer asked for time to gather statements.")
    case.refresh_from_db()
    assert case.close_due == date(2026, 6, 1)
    extension = case.events.filter(event_type="case.deadlines_changed").last()
    assert (extension.payload["cause"], extension.payload["reason"]) == (
        "extension", "Consumer asked for time to gather statements.")
    assert AuditEvent.objects.filter(action="cases.case.deadlines_changed").count() == 3
    assert diff_case(case) == {}
    call_command("case_replay", case.reference)  # raises CommandError on any drift


def test_extension_refusals_change_nothing(supervisor, analyst, case):
    current = case.close_due
    cases = [
        (analyst, "close", current + timedelta(days=5), "Why", Forbidden),
        (supervisor, "close", current + timedelta(days=5), "  ", Invalid),
        (supervisor, "close", current, "Same day", Invalid),
        (supervisor, "someday", current + timedelta(days=5), "Why", Invalid),
    ]
    for actor, deadline, until, reason, error in cases:
        with assert_nothing_changed(case), pytest.raises(error):
            services.case_deadline_extend(actor=actor, case=case, deadline=deadline, until=until, reason=reason)
    bring_case_to(case, "closed", supervisor=supervisor, analyst=analyst)
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="settled"):
        services.case_deadline_extend(actor=supervisor, case=case, deadline="close",
                                      until=current + timedelta(days=5), reason="Why")


def test_each_due_date_is_on_time_due_soon_overdue_or_met(analyst, supervisor):
    case = make_case(actor=analyst, received_at=date(2026, 3, 2))  # response 17 March, close 1 May
    states = {s.key: s.state for s in case_deadline_states(case, today=date(2026, 3, 15))}
    assert states == {"acknowledge": DUE_SOON, "response": DUE_SOON, "close": ON_TIME}
    states = {s.key: s.state for s in case_deadline_states(case, today=date(2026, 3, 20))}
    assert states == {"acknowledge": OVERDUE, "response": OVERDUE, "close": ON_TIME}
    bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    states = {s.key: s.state for s in case_deadline_states(case, today=date(2026, 6, 1))}
    assert states["close"] == MET and states["response"] == OVERDUE


def test_the_queue_can_sort_on_the_next_open_due_date(analyst, supervisor):
    late = make_case(actor=analyst, title="Late", received_at=date(2026, 1, 5))
    make_case(actor=analyst, title="Recent", received_at=date(2026, 3, 5))
    undated = make_case(actor=analyst, title="Decided", received_at=date(2025, 12, 1))
    bring_case_to(undated, "decided", supervisor=supervisor, analyst=analyst)
    rows = list(Case.objects.filter(tenant=late.tenant).with_deadlines()
                .order_by("next_due", "pk").values_list("title", "next_due"))
    # The decided case still owes its response notice (never sent): that is its next due date.
    assert rows == [("Decided", date(2025, 12, 16)), ("Late", date(2026, 1, 20)), ("Recent", date(2026, 3, 20))]


def test_crossings_are_recorded_once_and_again_when_the_date_moves(analyst, supervisor):
    case = make_case(actor=analyst, received_at=date(2026, 3, 2))
    with CountDelta() as delta:
        assert deadline_crossings_record(today=date(2026, 3, 15)) == 2  # acknowledge + response due soon
        assert deadline_crossings_record(today=date(2026, 3, 15)) == 0  # a second beat: nothing more
    assert (delta.case_events, delta.audit_events) == (2, 2)
    assert set(case.events.filter(event_type="deadline.due_soon").values_list("payload__deadline", flat=True)) == {
        "acknowledge", "response"}
    assert deadline_crossings_record(today=date(2026, 3, 18)) == 2  # now overdue: a new crossing each
    services.case_deadline_extend(actor=supervisor, case=case, deadline="response", until=date(2026, 3, 30),
                                  reason="Agreed with the consumer.")
    assert deadline_crossings_record(today=date(2026, 3, 28)) == 1  # the moved date is due soon again
    assert DeadlineCrossing.objects.filter(case=case).count() == 5
    case.refresh_from_db()
    assert case.version == 1 + 1 + 1  # created, narrative evidence, extension: crossings do not bump it
    assert diff_case(case) == {}


def test_deciding_without_a_sent_notice_needs_a_confirmation_with_a_reason(analyst, supervisor, case):
    bring_case_to(case, "ready_for_decision", supervisor=supervisor, analyst=analyst)
    with assert_nothing_changed(case), pytest.raises(Invalid, match="No notice was ever sent") as refused:
        services.case_transition(actor=supervisor, case=case, transition="decide", reason="Upheld.")
    assert "confirm_reason" in refused.value.fields
    services.case_transition(actor=supervisor, case=case, transition="decide", reason="Upheld.",
                             confirm_reason="Consumer withdrew by phone; notice not needed.")
    event = case.events.get(event_type="case.transitioned", payload__transition="decide")
    assert event.payload["confirmed_without_notice"] == "Consumer withdrew by phone; notice not needed."
    audit = AuditEvent.objects.filter(action="cases.case.transitioned").last()
    assert audit.payload["confirmed_without_notice"] == "Consumer withdrew by phone; notice not needed."
    with assert_nothing_changed(case), pytest.raises(Invalid, match="No notice was ever sent"):
        services.case_transition(actor=supervisor, case=case, transition="close")


def test_crossing_events_do_not_touch_the_case_row(analyst):
    case = make_case(actor=analyst, received_at=date(2026, 3, 2))
    before = Case.objects.filter(pk=case.pk).values_list("version", "updated_at").get()
    deadline_crossings_record(today=date(2026, 4, 1))
    assert Case.objects.filter(pk=case.pk).values_list("version", "updated_at").get() == before
    assert CaseEvent.objects.filter(case=case, event_type="deadline.overdue").count() == 2


def test_the_admin_adds_a_policy_version_through_the_service(client, supervisor, tenant):
    supervisor.is_staff = True
    supervisor.save(update_fields=["is_staff"])
    client.force_login(supervisor)
    form = client.get("/admin/cases/deadlinepolicy/add/")
    assert form.status_code == 200 and 'value="15"' in form.content.decode()
    data = {"country": "US", "subdivision": "CA", "acknowledge_days": 5, "acknowledge_day_count": "business",
            "response_days": 15, "response_day_count": "calendar", "close_days": 60, "close_day_count": "calendar",
            "due_soon_days": 3}
    response = client.post("/admin/cases/deadlinepolicy/add/", data, follow=True)
    assert response.status_code == 200
    newest = DeadlinePolicy.objects.filter(tenant=tenant).order_by("-version").first()
    assert (newest.version, newest.subdivision, newest.acknowledge_day_count, newest.created_by) == (
        2, "CA", "business", f"user:{supervisor.pk}")
    assert AuditEvent.objects.filter(action="cases.deadline_policy.created").count() == 1
    with assert_nothing_changed():
        refused = client.post("/admin/cases/deadlinepolicy/add/", data | {"subdivision": "XX"}, follow=True)
    assert "Unknown subdivision" in refused.content.decode()
    assert DeadlinePolicy.objects.filter(tenant=tenant).count() == 2
