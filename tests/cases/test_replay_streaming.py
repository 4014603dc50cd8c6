"""case_replay --all streams (ADR 0010): cases and events are two ordered scans read in small
batches and merged; every case is still checked against exactly its own events."""

import pytest
from django.core.management.base import CommandError

from cases import services
from cases.models import Case, CaseEvent
from tests.audit.tampering import table_triggers_disabled
from tests.cases.test_replay import run_replay
from tests.factories import make_case

pytestmark = pytest.mark.django_db


def test_replay_all_in_batches_finds_a_removed_event_a_tampered_row_and_a_case_without_events(
        analyst, outsider, settings):
    settings.ARBITER_AUDIT_VERIFY_BATCH_SIZE = 2  # batches cut through cases' event lists
    cases = [make_case(actor=analyst, title=f"Complaint {n}") for n in range(5)]
    for case in cases:
        services.case_transition(actor=analyst, case=case, transition="triage")
        services.case_transition(actor=analyst, case=case, transition="start_review")
    make_case(actor=outsider)
    out, _ = run_replay("--all")
    assert "OK: 6 cases match their event history." in out

    with table_triggers_disabled("cases_caseevent", "case events"):
        CaseEvent.objects.filter(case=cases[1], event_type="case.transitioned", payload__transition="triage").delete()
        CaseEvent.objects.filter(case=cases[4]).delete()
    Case.objects.filter(pk=cases[3].pk).update(status="closed")
    with pytest.raises(CommandError) as failed:
        run_replay("--all", "--tenant", "acme")
    assert str(failed.value) == "3 of 5 cases differ from their replay."
    lines = failed.value.stderr.splitlines()
    assert lines[0] == (f"DRIFT {cases[1].reference} (acme): event #4 (case.transitioned) cannot be "
                        f"replayed: transition start_review from triaged but state is new")
    assert f"DRIFT {cases[3].reference} (acme): status: stored 'closed', replayed 'under_review'" in lines
    assert lines[-1] == (f"DRIFT {cases[4].reference} (acme): no case.created event: the case has no history to "
                         f"replay")
