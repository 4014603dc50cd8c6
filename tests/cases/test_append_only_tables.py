"""Case events and evidence are written once: the database refuses UPDATE and DELETE."""

import pytest
from django.db import DatabaseError, transaction

from cases.models import CaseEvent, Evidence
from tests.audit.tampering import raw_execute


@pytest.mark.parametrize("sql", [
    "UPDATE cases_caseevent SET event_type = 'case.forged' WHERE case_id = %s",
    "DELETE FROM cases_caseevent WHERE case_id = %s",
    "UPDATE cases_evidence SET text = 'forged' WHERE case_id = %s",
    "DELETE FROM cases_evidence WHERE case_id = %s",
])
def test_raw_sql_cannot_change_case_events_or_evidence(case, sql):
    events_before = list(CaseEvent.objects.filter(case=case).values_list("pk", "event_type"))
    evidence_before = list(Evidence.objects.filter(case=case).values_list("pk", "text"))
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic():
            raw_execute(sql, [case.pk])
    assert list(CaseEvent.objects.filter(case=case).values_list("pk", "event_type")) == events_before
    assert list(Evidence.objects.filter(case=case).values_list("pk", "text")) == evidence_before


@pytest.mark.django_db(transaction=True)
def test_flush_keeps_every_append_only_trigger(analyst):
    from tests.factories import make_case

    case = make_case(actor=analyst)
    with pytest.raises(DatabaseError, match="append-only"):
        raw_execute("DELETE FROM cases_caseevent WHERE case_id = %s", [case.pk])
