"""Opening cases: references CASE-YYYY-NNNNNN unique per tenant, the created event, refusals."""

import re
from datetime import date

import pytest
from django.db import IntegrityError, transaction

from accounts.models import Role
from audit.models import AuditEvent
from cases import services
from cases.models import Case
from cases.reducer import REPLAYED_FIELDS
from core.errors import Forbidden, Invalid, NotFound
from tests.factories import UserFactory, make_case
from tests.helpers import CountDelta, assert_nothing_changed


def test_references_count_up_per_tenant_and_year(analyst, outsider):
    first = make_case(actor=analyst, received_at=date(2026, 1, 2))
    second = make_case(actor=analyst, received_at=date(2026, 12, 31))
    earlier_year = make_case(actor=analyst, received_at=date(2025, 6, 1))
    theirs = make_case(actor=outsider, received_at=date(2026, 5, 5))
    assert [first.reference, second.reference, earlier_year.reference] == [
        "CASE-2026-000001", "CASE-2026-000002", "CASE-2025-000001"]
    assert theirs.reference == "CASE-2026-000001"  # the other tenant has its own numbering


def test_reference_without_received_date_uses_the_current_year(analyst):
    from django.utils import timezone

    case = make_case(actor=analyst)
    assert re.fullmatch(rf"CASE-{timezone.now().year}-\d{{6}}", case.reference)


def test_reference_is_unique_per_tenant_in_the_database(analyst, tenant, other_tenant):
    case = make_case(actor=analyst, received_at=date(2026, 1, 2))
    with pytest.raises(IntegrityError), transaction.atomic():
        Case.objects.create(tenant=tenant, reference=case.reference, title="Duplicate")
    Case.objects.create(tenant=other_tenant, reference=case.reference, title="Same number elsewhere")


def test_created_case_has_its_event_audit_and_narrative(analyst):
    with CountDelta() as delta:
        case = make_case(actor=analyst, received_at=date(2026, 2, 3), complainant_name="Jane Roe")
    assert (case.status, case.risk_level, case.version) == ("new", "unassessed", 2)
    assert (delta.case_events, delta.audit_events, delta.evidence) == (2, 2, 1)
    created = case.events.get(sequence=1)
    assert created.event_type == "case.created"
    assert set(created.payload) == set(REPLAYED_FIELDS)
    assert created.payload["reference"] == case.reference
    assert "complainant_name" not in created.payload  # personal data stays out of the event log
    assert AuditEvent.objects.filter(stream=f"case:{case.pk}").first().action == "cases.case.created"


def test_case_without_narrative_has_no_evidence(analyst, tenant):
    case = services.case_create(actor=analyst, tenant=tenant, title="Phone complaint")
    assert (case.version, case.evidence.count(), case.events.count()) == (1, 0, 1)


@pytest.mark.parametrize(("title", "message"), [("", "A case needs a title."), ("  ", "A case needs a title."),
                                                ("x" * 301, "At most 300 characters.")])
def test_invalid_title(title, message, analyst, tenant):
    with assert_nothing_changed(), pytest.raises(Invalid) as refused:
        services.case_create(actor=analyst, tenant=tenant, title=title)
    assert refused.value.fields == {"title": [message]}
    assert not Case.objects.exists()


def test_unknown_fields_are_invalid(analyst, tenant):
    with assert_nothing_changed(), pytest.raises(Invalid, match="Unknown case fields: status, version"):
        services.case_create(actor=analyst, tenant=tenant, title="T", status="closed", version=7)


def test_admin_may_open_cases_but_not_auditor_or_agent(tenant, admin_user, auditor, agent):
    services.case_create(actor=admin_user, tenant=tenant, title="Opened by operations")
    for actor in (auditor, agent):
        with assert_nothing_changed(), pytest.raises(Forbidden):
            services.case_create(actor=actor, tenant=tenant, title="Nope")


def test_outsider_cannot_open_a_case_in_another_tenant(outsider, tenant):
    with assert_nothing_changed(), pytest.raises(NotFound):
        services.case_create(actor=outsider, tenant=tenant, title="Planted")
    assert not Case.objects.filter(tenant=tenant).exists()


def test_invalid_complaint_field_is_invalid_not_a_crash(analyst, tenant):
    with assert_nothing_changed(), pytest.raises(Invalid) as refused:
        services.case_create(actor=analyst, tenant=tenant, title="T", complainant_email="not-an-address",
                             product="p" * 201)
    assert set(refused.value.fields) == {"complainant_email", "product"}


def test_refused_case_does_not_consume_a_reference(analyst, tenant):
    with pytest.raises(Invalid):
        services.case_create(actor=analyst, tenant=tenant, title="", received_at=date(2026, 1, 1))
    with pytest.raises(Invalid):  # refused after the counter was taken: the increment rolls back too
        services.case_create(actor=analyst, tenant=tenant, title="T", complainant_email="bad",
                             received_at=date(2026, 1, 1))
    case = services.case_create(actor=analyst, tenant=tenant, title="Real", received_at=date(2026, 1, 1))
    assert case.reference == "CASE-2026-000001"


def test_supervisor_opens_case(tenant):
    boss = UserFactory(username="boss", tenant=tenant, role=Role.SUPERVISOR)
    case = services.case_create(actor=boss, tenant=tenant, title="From the boss", received_at=date(2026, 7, 1))
    assert case.reference == "CASE-2026-000001"
