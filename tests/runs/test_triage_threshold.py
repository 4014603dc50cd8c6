"""Triage below ARBITER_TRIAGE_MIN_CONFIDENCE needs an analyst and is disputed, whatever the provider
said itself: a real model (Gemma 3 270M) answered confidence 0.40 with needs_analyst false, and its
adjudicator raised no dispute on it. The guard is the graph's, for every provider."""

from __future__ import annotations

import pytest

from agents.schemas import UNCLASSIFIED
from cases import services as case_services
from runs import services
from runs.models import Artifact, Finding, RunStatus
from runs.state_load import state_at
from tests.runs.conftest import FakeProvider, drive

pytestmark = pytest.mark.django_db
NARRATIVE = ("My student loan servicer applied my payments to the wrong loan for six months and will not fix "
             "the account. I want the payments moved to the right loan and the late fees removed.")


def _run(analyst, monkeypatch, *, confidence: float, product: str = "", disputes: list | None = None):
    triage = {"product": "Student loan", "issue": "Dealing with your lender or servicer", "respondent": "Servicer",
              "requested_remedy": "", "confidence": confidence, "needs_analyst": False, "evidence_refs": []}
    adjudication = {"summary": "Student loan servicing, medium risk.", "risk_level": "medium",
                    "recommended_transition": "start_review", "disputes": disputes or [], "confidence": 0.9}
    provider = FakeProvider({"triage": triage, "adjudicator": adjudication})
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Servicer misapplied payments",
                                     narrative=NARRATIVE, product=product, company="Servicer",
                                     complainant_email="consumer@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = drive(services.run_start(actor=analyst, case=case))
    assert run.status == RunStatus.COMPLETED
    finding = Finding.objects.get(run=run, agent="triage", type="triage")
    topics = [d["topic"] for d in Artifact.objects.filter(run=run, kind="dispute").values_list("content", flat=True)]
    return run, finding, topics


def _triaged_with(analyst, monkeypatch, triage: dict):
    """A run on a new case whose provider answers triage with `triage`; the run and its triage finding."""
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: FakeProvider({"triage": triage}))
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Servicer misapplied payments",
                                     narrative=NARRATIVE, company="Servicer", complainant_email="consumer@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = drive(services.run_start(actor=analyst, case=case))
    return run, Finding.objects.filter(run=run, agent="triage", type="triage").first()


def test_a_triage_below_the_threshold_needs_an_analyst_and_is_disputed(analyst, monkeypatch, settings):
    settings.ARBITER_TRIAGE_MIN_CONFIDENCE = 0.6
    run, finding, topics = _run(analyst, monkeypatch, confidence=0.4)
    assert finding.data["needs_analyst"] is True
    assert finding.summary.startswith("Needs an analyst: product and issue are uncertain (confidence 0.40 is below 0.60)")
    assert topics == ["triage confidence"]
    assert any("confidence 0.40 is below 0.60" in note for note in state_at(run)[0].notes)


def test_a_confident_triage_or_a_recorded_product_is_left_alone_and_a_dispute_is_not_doubled(
        analyst, monkeypatch, settings):
    settings.ARBITER_TRIAGE_MIN_CONFIDENCE = 0.6
    _, finding, topics = _run(analyst, monkeypatch, confidence=0.9)
    assert finding.data["needs_analyst"] is False and topics == []
    _, finding, topics = _run(analyst, monkeypatch, confidence=0.4, product="Student loan")
    assert finding.data["needs_analyst"] is False and topics == []
    own = [{"topic": "product", "positions": ["triage: Student loan", "narrative: mortgage"], "resolution": "Ask."}]
    _, finding, topics = _run(analyst, monkeypatch, confidence=0.4, disputes=own)
    assert finding.data["needs_analyst"] is True and topics == ["product"]


def test_an_issue_that_is_not_one_of_the_product_s_is_refused_and_needs_an_analyst(analyst, monkeypatch):
    """Gemma 3 270M paired products and issues the CFPB never paired ("Credit reporting" / "Incorrect
    exchange rate"): each label is in the taxonomy, the pair is not."""
    triage = {"product": "Credit reporting", "issue": "Incorrect exchange rate", "respondent": "Servicer",
              "requested_remedy": "", "confidence": 0.95, "needs_analyst": False, "evidence_refs": []}
    run, finding = _triaged_with(analyst, monkeypatch, triage)
    assert finding.data["needs_analyst"] is True
    assert finding.data["invalid_labels"] == ["issue 'Incorrect exchange rate' (not an issue of 'Credit reporting')"]


def test_an_unclassified_answer_at_high_confidence_needs_an_analyst(analyst, monkeypatch):
    """Gemma 3 270M answered "Unclassified (no narrative to classify)" at confidence 0.98 on a
    complaint with a narrative, and nothing asked for a person."""
    triage = {"product": UNCLASSIFIED, "issue": "Issue where my lender is my school", "respondent": "Servicer",
              "requested_remedy": "", "confidence": 0.98, "needs_analyst": False, "evidence_refs": []}
    run, finding = _triaged_with(analyst, monkeypatch, triage)
    assert finding.data["needs_analyst"] is True
    assert finding.summary.startswith("Needs an analyst: product and issue are uncertain (no product or issue was "
                                      "classified)")
    topics = [d["topic"] for d in Artifact.objects.filter(run=run, kind="dispute").values_list("content", flat=True)]
    assert "triage confidence" in topics
