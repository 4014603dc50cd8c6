"""The full CFPB taxonomy as published: shipped as data with its source, renames mapped to today's
names, checked against every label of the sample, and a consumer-recorded label in it accepted."""

from __future__ import annotations

import json

import pytest

from agents import taxonomy
from agents.schemas import TriageOutput
from cases import services as case_services
from runs import services
from runs.models import Artifact, Finding, RunStatus
from tests.runs.conftest import drive
from tests.runs.test_providers_offline import ROWS

# Published by the CFPB for debt collection, and in no row of the 191-complaint sample.
HELD_OUT_ISSUE = "Electronic communications"


def test_every_label_of_the_sample_is_in_the_published_taxonomy_and_every_rename_leads_to_one():
    assert taxonomy.check_sample() == []
    assert taxonomy.main(["--check"]) == 0


def test_the_published_taxonomy_names_its_source_and_date():
    published = json.loads(taxonomy.PUBLISHED_FILE.read_text())
    source = published["source"]
    urls = [document["url"] for document in source["documents"]]
    assert any("201704_cfpb_Consumer_Complaint_Form_Product_and_Issue_Options.pdf" in url for url in urls)
    assert source["transcribed_on"] and "498bf5dcb98fd42f6d0083f8e59252ffcce84a5e" in json.dumps(source)
    note = (taxonomy.PUBLISHED_FILE.parent / "SOURCE.md").read_text()
    assert "201704_cfpb_Consumer_Complaint_Form_Product_and_Issue_Options.pdf" in note
    # Today's form: every product with its sub-products and issues.
    today = published["products"]
    assert {"Credit card", "Prepaid card", "Debt or credit management",
            "Credit reporting or other personal consumer reports"} <= set(today)
    assert all(entry["sub_products"] and entry["issues"] for entry in today.values())


@pytest.mark.parametrize(("old", "kind", "today"), [
    ("Credit reporting", "products", "Credit reporting or other personal consumer reports"),
    ("Credit reporting, credit repair services, or other personal consumer reports", "products",
     "Credit reporting or other personal consumer reports"),
    ("Payday loan", "products", "Payday loan, title loan, personal loan, or advance loan"),
    ("Credit card or prepaid card", "products", "Credit card"),
    ("Credit card", "products", "Credit card"),
    ("Bank account or service", "products", "Checking or savings account"),
    ("Mortgage", "products", "Mortgage"),
    ("Credit reporting company's investigation", "issues",
     "Problem with a company's investigation into an existing problem"),
    ("Cont'd attempts collect debt not owed", "issues", "Attempts to collect debt not owed"),
])
def test_renames_over_the_years_map_to_todays_names(old, kind, today):
    assert taxonomy.today_name(old, kind) == today


def test_the_schema_enum_comes_from_the_full_list():
    issue_enum = TriageOutput.model_json_schema()["properties"]["issue"]["enum"]
    product_enum = TriageOutput.model_json_schema()["properties"]["product"]["enum"]
    assert HELD_OUT_ISSUE in issue_enum and HELD_OUT_ISSUE not in json.dumps(taxonomy.derive_taxonomy())
    assert {"Debt or credit management", "Payday loan, title loan, personal loan, or advance loan"} <= set(product_enum)
    assert set(taxonomy.sample_products()) <= set(product_enum)


@pytest.mark.django_db
def test_a_recorded_issue_the_cfpb_publishes_is_accepted_without_dispute_or_replan(analyst):
    row = next(r for r in ROWS.values() if r["Product"] == "Debt collection")
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Complaint",
                                     narrative=row["Consumer complaint narrative"], company=row["Company"],
                                     product="Debt collection", issue=HELD_OUT_ISSUE,
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert run.status == RunStatus.COMPLETED, run.error
    triage = Finding.objects.get(run=run, type="triage")
    assert triage.data["issue"] == HELD_OUT_ISSUE and not triage.data.get("invalid_labels")
    assert triage.data["needs_analyst"] is False and not triage.summary.startswith("Needs an analyst")
    assert not Artifact.objects.filter(run=run, kind="dispute", content__topic="triage confidence").exists()
    assert not Artifact.objects.filter(run=run, kind="reflection", content__replan=True).exists()


@pytest.mark.django_db
def test_a_recorded_issue_outside_the_taxonomy_is_still_refused(analyst):
    row = next(r for r in ROWS.values() if r["Product"] == "Debt collection")
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Complaint",
                                     narrative=row["Consumer complaint narrative"], company=row["Company"],
                                     product="Debt collection", issue="Something no form ever offered",
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    triage = Finding.objects.filter(run=run, type="triage").order_by("pk").first()
    assert triage.data["needs_analyst"] is True and triage.data["invalid_labels"]
