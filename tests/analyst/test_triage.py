"""Triage that doubts itself: the narrative's reading and the company prior kept apart, and a
dispute in words when they disagree."""

from __future__ import annotations

import pytest

from analyst.triage import narrative_against_company
from cases import services as case_services
from runs import services
from runs.models import Artifact, Finding, RunStatus
from tests.runs.conftest import drive
from tests.runs.test_providers_offline import ROWS, ask, context_for

STUDENT_ROW = next(cid for cid, row in ROWS.items() if row["Product"] == "Student loan"
                   and row["Company"] != "EQUIFAX, INC." and len(row["Consumer complaint narrative"]) > 400)


def test_a_disagreement_is_said_in_words_and_agreement_or_no_prior_says_nothing():
    views = {"narrative": {"Student loan": 0.9, "Mortgage": 0.1},
             "company": {"Mortgage": 0.8, "Student loan": 0.2}}
    doubt = narrative_against_company(views, "Acme Servicing", None)
    assert doubt["company_product"] == "Mortgage" and doubt["narrative_reading"] == "Student loan"
    assert doubt["doubt"].startswith("The narrative reads like Student loan; complaints against Acme Servicing "
                                     "are usually Mortgage.")
    assert narrative_against_company({**views, "company": {"Student loan": 1.0}}, "Acme", None) == {}
    assert narrative_against_company({**views, "company": {}}, "Unknown", None) == {}
    assert narrative_against_company({}, "Acme", None) == {}


def test_triage_names_the_disagreement_and_the_adjudicator_disputes_it():
    context = context_for(STUDENT_ROW, keep_labels=False, company="EQUIFAX, INC.")
    triage = ask("triage", context).output
    assert triage.narrative_reading == "Student loan"
    assert triage.company_product.startswith("Credit reporting")
    assert "complaints against EQUIFAX, INC. are usually Credit reporting" in triage.doubt
    context["prior"]["triage"] = triage.model_dump(mode="json")
    [dispute] = [d for d in ask("adjudicator", context).output.disputes
                 if d.topic == "product: narrative and company prior"]
    assert dispute.positions == ["narrative: reads like Student loan",
                                 f"company prior: usually {triage.company_product}"]
    assert dispute.resolution.startswith(triage.doubt)
    # Its own respondent agrees with the narrative: no doubt, no such dispute.
    agreeing = context_for(STUDENT_ROW, keep_labels=False)
    assert ask("triage", agreeing).output.doubt is None


@pytest.mark.django_db
def test_the_graph_shows_the_doubt_in_the_finding_and_keeps_the_dispute(analyst):
    row = ROWS[STUDENT_ROW]
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Complaint",
                                     narrative=row["Consumer complaint narrative"], company="EQUIFAX, INC.",
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run.status == RunStatus.COMPLETED, run.error
    finding = Finding.objects.get(run=run, type="triage")
    assert "complaints against EQUIFAX, INC. are usually" in finding.summary
    assert Artifact.objects.filter(run=run, kind="dispute", content__topic="product: narrative and company prior").exists()


def test_the_adjudicator_s_first_paragraph_says_what_the_agents_disagree_on():
    """A supervisor reads the dispute's subject in the first paragraph, not just a count; the
    positions stay in the details."""
    context = context_for(STUDENT_ROW, keep_labels=False, company="EQUIFAX, INC.")
    context["prior"]["triage"] = ask("triage", context).output.model_dump(mode="json")
    rationale = ask("adjudicator", context).output.summary
    first, details = rationale.split("\n\n", 1)
    assert "the agents disagree on the product" in first and "(see the details)" in first
    assert "dispute between the agents" not in first
    assert "Dispute on the product (narrative and company prior): The narrative reads like Student loan" in details
