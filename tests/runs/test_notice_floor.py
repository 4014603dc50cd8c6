"""A response notice the policy requires is drafted whatever the model's policy check answered:
Gemma 3 270M answered "no notice due" on new complaints awaiting their acknowledgement, and the
graph took its word. The model's "yes" alone still drafts nothing (the case's status and the live
notices decide). A guard of the graph, for every provider."""

from __future__ import annotations

import pytest

from cases import services as case_services
from cases.models import Notice
from runs import services
from runs.models import RunStatus
from runs.state_load import state_at
from tests.runs.conftest import FakeProvider, drive

pytestmark = pytest.mark.django_db
NARRATIVE = ("My card was charged twice for the same hotel stay in March, $412 each time. I asked the bank to "
             "reverse the second charge and it has not.")


def _analysed(analyst, monkeypatch, *, notice_due: bool, transition: str | None = "triage"):
    check = {"rules": [{"code": "ACK-15", "applies": True, "reason": "received", "deadline": None}],
             "notice_due": notice_due, "notice_reason": "nothing to send yet" if not notice_due else "ACK-15"}
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: FakeProvider({"policy_checker": check}))
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Charged twice for one stay",
                                     narrative=NARRATIVE, product="Credit card", company="Example Bank",
                                     complainant_email="consumer@example.org")
    if transition:
        case_services.case_transition(actor=analyst, case=case, transition=transition)
    run = drive(services.run_start(actor=analyst, case=case))
    assert run.status == RunStatus.COMPLETED
    return case, run


def test_a_model_answering_no_notice_due_does_not_keep_a_required_notice_from_being_drafted(analyst, monkeypatch):
    case, run = _analysed(analyst, monkeypatch, notice_due=False)
    notices = list(Notice.objects.filter(case=case, kind="response"))
    assert len(notices) == 1
    notes = state_at(run)[0].notes
    assert any("the policy check answered that no notice is due (nothing to send yet); the policy requires one"
               in note for note in notes), notes


def test_a_model_answering_notice_due_on_a_new_case_drafts_nothing(analyst, monkeypatch):
    case, run = _analysed(analyst, monkeypatch, notice_due=True, transition=None)
    assert not Notice.objects.filter(case=case).exists()
    assert any(note.startswith("notice_drafter: no notice drafted — the case is new") for note in state_at(run)[0].notes)
