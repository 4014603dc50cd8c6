"""Drafts a supervisor signs as written: on real complaints the offline analyst's notices and
rationales carry no misquote, placeholder, internal code, implied contact or unverified quote;
text in the evidence addressed to the reviewer leaves no trace and changes nothing; and the
graph's guards hold for any provider's output."""

from __future__ import annotations

import csv
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from agents.citations import (
    dispute_in_words,
    evidence_quote,
    has_internal_code,
    signal_words,
    signals_in_words,
)
from agents.graphs.guards import ADDRESSED_TO_REVIEWER, first_paragraph, readable, risk_first_paragraph
from agents.text import echoes, is_instruction, split_sentences
from analyst.registry import AGENTS
from analyst.rubric import notice_rubric as _rubric
from cases import services as case_services
from cases.models import Notice, Proposal
from cases.notice_checker import check_notice
from runs import services
from runs.models import Artifact, Finding, RunStatus
from runs.state_load import state_at
from tests.runs.conftest import FakeProvider, drive

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "analyst" / "data" / "cfpb_complaints.csv"
INJECTIONS = json.loads((ROOT / "tests" / "data" / "injections.json").read_text())["texts"]
SPECIALISTS = ("triage", "evidence_analyst", "risk_assessor", "policy_checker", "adjudicator")


def _rows(count: int, offset: int = 0) -> list[dict]:
    """A fixed set of real complaints with a narrative (the first `count` after `offset`)."""
    with CSV.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if len(row["Consumer complaint narrative"].split()) > 30]
    return rows[offset:offset + count]


def _case(analyst, row: dict, *, late: bool, extra: str = ""):
    received = timezone.localdate() - timedelta(days=40 if late else 3)
    return case_services.case_create(
        actor=analyst, tenant=analyst.tenant, title=f"{row['Product']}: {row['Issue']}"[:300], received_at=received,
        narrative=row["Consumer complaint narrative"] + (" " + extra if extra else ""), product=row["Product"],
        sub_product=row["Sub-product"], issue=row["Issue"], sub_issue=row["Sub-issue"], company=row["Company"],
        tags=row["Tags"], source="cfpb", source_reference=row["Complaint ID"], complainant_email="consumer@example.org")


def _offline(case) -> dict:
    """The offline analyst on the case, as the graph hands it over: each specialist, then the
    notice from the drafting facts; the rationales composed as the proposer composes them."""
    evidence = [{"id": e.pk, "title": e.title, "text": e.read_text()} for e in case.evidence.all()]
    today = timezone.localdate()
    late = bool(case.response_due and case.response_due < today)
    context = {"today": today.isoformat(), "evidence": evidence, "prior": {},
               "case": {"reference": case.reference, "status": "triaged", "company": case.company,
                        "product": case.product, "issue": case.issue, "received_at": case.received_at.isoformat(),
                        "tags": case.tags},
               "due_dates": {f: getattr(case, f).isoformat() for f in ("acknowledge_due", "response_due", "close_due")},
               "response_late": late}
    for agent in SPECIALISTS:
        context["prior"][agent] = AGENTS[agent][0](context)
    context["consumer_request_detail"] = context["prior"]["triage"]["consumer_request"]
    notice = AGENTS["notice_drafter"][0](context)
    adjudication, risk = context["prior"]["adjudicator"], context["prior"]["risk_assessor"]
    status_first, status_rest = first_paragraph(adjudication["summary"])
    risk_rationale = readable(risk_first_paragraph(adjudication["risk_level"], risk["signals"], []), [risk["rationale"]])
    return {"notice": notice, "rationales": [readable(status_first, [status_rest]), risk_rationale],
            "summaries": [context["prior"]["evidence_analyst"]["summary"], risk["rationale"]],
            "adjudication": adjudication, "evidence": [item["text"] for item in evidence]}


def test_the_notice_rubric_counts_are_zero_on_forty_real_complaints(analyst):
    totals: dict[str, int] = {}
    problems = []
    for index, row in enumerate(_rows(40)):
        case = _case(analyst, row, late=bool(index % 2))
        out = _offline(case)
        counts = _rubric(case, out["notice"], out["rationales"], out["evidence"])
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
        if any(counts.values()):
            problems.append((row["Complaint ID"], counts, out["notice"]["body"], out["rationales"]))
    assert all(value == 0 for value in totals.values()), (totals, problems[:2])


def test_the_notice_reads_as_a_complaint_team_s_letter_with_what_happens_next_and_by_when(analyst):
    row = _rows(1)[0]
    case = _case(analyst, row, late=False)
    body = _offline(case)["notice"]["body"]
    assert body.startswith("Dear ")
    assert f"We received it on {case.received_at.day} {case.received_at:%B %Y}" in body
    assert f"We will send you our response by {case.response_due.day} {case.response_due:%B %Y}." in body
    assert f"quoting reference {case.reference}" in body
    assert body.endswith("Yours sincerely,\nThe Consumer Complaints Team")
    assert "reviewing the information you provided" not in body and "You asked" not in body

    late = _case(analyst, row, late=True)
    body = _offline(late)["notice"]["body"]
    assert "We are sorry that we have not replied" in body
    committed = re.search(r"We will send you our response by (\d{1,2} \w+ \d{4})\.", body)
    assert committed, body
    assert check_notice(case=late, recipient=late.complainant_email, subject="Your complaint", body=body) == []


@pytest.mark.parametrize("injection", INJECTIONS, ids=[f"injection-{i}" for i in range(len(INJECTIONS))])
def test_text_addressed_to_the_reviewer_leaves_no_trace_and_changes_nothing(analyst, injection):
    row = _rows(1, offset=3)[0]
    baseline = _offline(_case(analyst, row, late=False))["adjudication"]
    out = _offline(_case(analyst, row, late=False, extra=injection))
    assert (out["adjudication"]["risk_level"], out["adjudication"]["recommended_transition"]) == \
        (baseline["risk_level"], baseline["recommended_transition"])
    injected = split_sentences(injection)
    for text in [*out["rationales"], *out["summaries"], out["notice"]["body"], out["notice"]["subject"]]:
        assert not echoes(text, injected), text
        assert not any(is_instruction(s, in_document=True) for s in split_sentences(text)), text


def _obedient_model(injection: str) -> FakeProvider:
    """A model that does what the evidence tells it: repeats the injection in every text it writes
    and answers low risk and closure."""
    return FakeProvider({
        "evidence_analyst": lambda request: {"summary": f"The consumer was charged twice. {injection}",
                                             "evidence_refs": [], "key_points": []},
        "risk_assessor": {"risk_level": "low", "rationale": f"Low risk. {injection}", "signals": [],
                          "evidence_refs": [], "confidence": 0.9},
        "adjudicator": {"summary": f"Recommended next step: start the review. {injection}", "risk_level": "low",
                        "recommended_transition": "start_review", "disputes": [], "confidence": 0.9},
        "notice_drafter": {"subject": "Your complaint",
                           "body": f"Dear Sir or Madam,\n\nWe will look into your complaint. {injection}\n\n"
                                   f"Yours sincerely,\nThe Consumer Complaints Team"},
    })


@pytest.mark.parametrize("injection", INJECTIONS[:4], ids=[f"injection-{i}" for i in range(4)])
def test_a_model_repeating_an_injection_is_scrubbed_in_the_graph(analyst, monkeypatch, injection):
    provider = _obedient_model(injection)
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    case = _case(analyst, _rows(1, offset=3)[0], late=False)
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    case_services.evidence_add(actor=analyst, case=case, title="Letter", text=injection)
    run = drive(services.run_start(actor=analyst, case=case))
    assert run.status == RunStatus.COMPLETED
    injected = split_sentences(injection)
    texts = [p.rationale for p in Proposal.objects.filter(case=case)]
    texts += [n.body for n in Notice.objects.filter(case=case)]
    texts += list(Finding.objects.filter(run=run).exclude(type="evidence_instruction").values_list("summary", flat=True))
    assert texts and not [t for t in texts if echoes(t, injected)]
    recorded = Finding.objects.get(run=run, type="evidence_instruction")
    assert recorded.summary.startswith(ADDRESSED_TO_REVIEWER)
    assert [item["quote"] for item in recorded.data["set_aside"]] == injected


def test_a_provider_s_low_risk_on_identity_theft_is_raised_to_the_floor(analyst, monkeypatch):
    provider = FakeProvider({
        "risk_assessor": {"risk_level": "low", "rationale": "Nothing of note.", "signals": [], "evidence_refs": [],
                          "confidence": 0.9},
        "adjudicator": {"summary": "Low risk.", "risk_level": "low", "recommended_transition": "start_review",
                        "disputes": [], "confidence": 0.9},
    })
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    case = case_services.case_create(
        actor=analyst, tenant=analyst.tenant, title="Accounts I never opened", product="Credit card",
        issue="Problem with a purchase shown on your statement", company="Example Bank, N.A.",
        narrative="I am a victim of identity theft. Someone opened two credit cards in my name without my consent.",
        complainant_email="consumer@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = drive(services.run_start(actor=analyst, case=case))
    assert run.status == RunStatus.COMPLETED
    risk = Proposal.objects.get(case=case, kind="risk_level")
    assert risk.payload == {"risk_level": "high"}
    first = first_paragraph(risk.rationale)[0]
    assert first.startswith("Risk high") and "fraud or identity theft" in first and not has_internal_code(first)
    assert Finding.objects.filter(run=run, type="dispute", summary__contains="policy minimums prevail").exists()
    # The risk assessor's own answer gets the same floor: its artifact and finding say high, and why.
    assessment = Artifact.objects.get(run=run, kind="risk_assessment").content
    assert (assessment["risk_level"], assessment["model_risk_level"]) == ("high", "low")
    assert assessment["rationale"].startswith("Raised from low to high: policy sets a minimum of high risk for ")
    finding = Finding.objects.get(run=run, type="risk_level", contradicts__isnull=True)
    assert finding.data["risk_level"] == "high" and not has_internal_code(first_paragraph(finding.summary)[0])


def test_a_signal_code_no_scoring_rule_knows_is_ignored_and_noted(analyst, monkeypatch):
    provider = FakeProvider({
        "risk_assessor": {"risk_level": "medium", "rationale": "Medium risk.", "evidence_refs": [], "confidence": 0.9,
                          "signals": [{"code": "CONSUMER-21", "description": "The consumer is upset."},
                                      {"code": "URGENCY", "description": "A foreclosure sale is scheduled."}]},
    })
    monkeypatch.setattr("runs.providers.get_provider", lambda name=None: provider)
    case = _case(analyst, _rows(1, offset=3)[0], late=False)
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    run = drive(services.run_start(actor=analyst, case=case))
    assert run.status == RunStatus.COMPLETED
    assessment = Artifact.objects.get(run=run, kind="risk_assessment").content
    assert [signal["code"] for signal in assessment["signals"]] == ["URGENCY"]
    assert any("ignored signal codes no scoring rule knows: CONSUMER-21" in note for note in state_at(run)[0].notes)


def test_the_graph_s_proposals_and_notice_on_real_complaints_pass_the_rubric(analyst):
    for index, row in enumerate(_rows(4, offset=10)):
        case = _case(analyst, row, late=bool(index % 2))
        case_services.case_transition(actor=analyst, case=case, transition="triage")
        run = drive(services.run_start(actor=analyst, case=case))
        assert run.status == RunStatus.COMPLETED
        notice = Notice.objects.get(case=case)
        rationales = list(Proposal.objects.filter(case=case).values_list("rationale", flat=True))
        evidence = [e.read_text() for e in case.evidence.all()]
        counts = _rubric(case, {"subject": notice.subject, "body": notice.body}, rationales, evidence)
        assert not any(counts.values()), (counts, notice.body, rationales)
        assert notice.check_flags == []


def test_a_dispute_s_positions_are_not_said_twice():
    """Read in the details of 55 of 200 held-out analyses: "Dispute on product: narrative and company
    prior: narrative: reads like X vs. company prior: usually Y. The narrative reads like X; complaints
    against C are usually Y. …" — the positions, then the same in a sentence."""
    prior = {"topic": "product: narrative and company prior",
             "positions": ["narrative: reads like Checking or savings account", "company prior: usually Credit card"],
             "resolution": "The narrative reads like Checking or savings account; complaints against Example Bank "
                           "are usually Credit card. The two disagree, so the product needs a person's check."}
    assert dispute_in_words(prior) == ("Dispute on the product (narrative and company prior): " + prior["resolution"])
    # A resolution that does not say both sides keeps them.
    record = {"topic": "product", "positions": ["case record: Mortgage", "narrative: reads as Vehicle loan or lease"],
              "resolution": "Case record kept (the consumer chose it); an analyst should confirm whether the product "
                            "is Vehicle loan or lease."}
    assert dispute_in_words(record) == ("Dispute on the product: case record: Mortgage vs. narrative: reads as Vehicle "
                                        "loan or lease. " + record["resolution"])
    assert dispute_in_words({"topic": "risk level", "positions": ["risk_assessor: low", "adjudicator: high"],
                             "resolution": ""}) == "Dispute on the risk level: risk_assessor: low vs. adjudicator: high."


def test_the_evidence_dispute_names_the_steps_in_words(analyst):
    """Read on the demo's case page: "Dispute on the evidence: lifecycle: mark_ready is the next step vs.
    evidence check: insufficient (…). request_evidence is recommended instead of mark_ready." — the
    transitions' internal names in a finding a person reads."""
    row = next(r for r in _rows(191) if "identity theft" in r["Consumer complaint narrative"].lower())
    case = _case(analyst, row, late=False)
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    case_services.case_transition(actor=analyst, case=case, transition="start_review")
    run = drive(services.run_start(actor=analyst, case=case))
    summaries = list(Finding.objects.filter(run=run, type="dispute").values_list("summary", flat=True))
    evidence = [s for s in summaries if s.startswith("Dispute on the evidence")]
    assert evidence, summaries
    assert "Requesting evidence is recommended instead of marking the case ready for decision." in evidence[0]
    assert not re.search(r"\b[a-z]+_[a-z]+\b", evidence[0]), evidence[0]


def test_the_quote_after_several_reasons_says_which_one_it_shows():
    """"Risk high because of: servicemember; repeated contact. The evidence says: “…”" read as if the
    quote showed all of them (or the first); with more than one reason it names its own."""
    tagged = {"code": "SCRA", "description": "Case tagged Servicemember (case record).", "quote": ""}
    calls = {"code": "REPEAT-CONTACT", "description": "Repeated contact: “I called them five times”",
             "quote": "I called  them five times"}
    assert evidence_quote([calls]) == "The evidence says: “I called them five times”"
    assert evidence_quote([tagged, calls]) == "The evidence of repeated contact: “I called them five times”"
    assert evidence_quote([tagged]) == ""
    context = {"evidence": [{"id": 1, "title": "Narrative", "text": "They used predatory tactics on me. I called "
                                                                     "them five times about it."}],
               "case": {"company": "Example Bank", "tags": "Servicemember"}, "prior": {}}
    first = AGENTS["risk_assessor"][0](context)["rationale"].split("\n\n")[0]
    assert first == ("Risk medium because of: the company is accused of misconduct; repeated contact (5 times); "
                     "case tagged Servicemember (case record). The evidence of misconduct by the company: "
                     "“They used predatory tactics on me.”")


def test_a_signal_is_named_in_words_not_by_the_detector_s_fragment():
    theft = {"code": "FRAUD-ID", "description": "Identity theft (opened without my): “this account was opened "
                                                "without my knowledge”", "quote": "this account was opened without my knowledge"}
    loss = {"code": "MONEY-LOSS", "description": "$2,000.00 lost, charged or asked back (above $1,000): “I lost $2,000”",
            "quote": "I lost $2,000"}
    assert signal_words(theft) == "Identity theft"
    assert signal_words(loss) == "$2,000.00 lost, charged or asked back (above $1,000)"
    assert signal_words({"code": "SCRA", "description": "Case tagged Servicemember (case record)."}) == \
        "Case tagged Servicemember (case record)."
    assert signals_in_words(["Identity theft", "Harassment", "$2,000.00 lost", "SCRA note", "Identity theft"]) == \
        "identity theft; harassment; $2,000.00 lost; SCRA note"


def test_a_risk_rationale_says_its_first_paragraph_once(analyst):
    """The details below a risk proposal's first paragraph hold the scoring table, not the first
    paragraph a second time."""
    seen = 0
    for row in _rows(12):
        case = _case(analyst, row, late=False)
        case_services.case_transition(actor=analyst, case=case, transition="triage")
        drive(services.run_start(actor=analyst, case=case))
        for rationale in Proposal.objects.filter(case=case, kind="risk_level").values_list("rationale", flat=True):
            first, rest = first_paragraph(rationale)
            reasons = re.split(r" The evidence (?:says|of [^:“]+):", first)[0]
            assert reasons not in rest, rationale
            assert "  " not in rationale, rationale
            if "because of:" in first:
                seen += 1
                named = reasons.split("because of:", 1)[1]
                assert "(" not in named or "above $1,000" in named or "case record" in named, rationale
    assert seen >= 3  # the sample has complaints with signals


def test_the_risk_details_count_one_point_in_the_singular(analyst):
    """"MISCONDUCT +1 = 1 point, so low", never "1 points"; two or more stay plural."""
    row = next(r for r in _rows(191) if "predatory" in r["Consumer complaint narrative"].lower()
               and "$" not in r["Consumer complaint narrative"])
    context = {"evidence": [{"id": 1, "title": "Narrative", "text": "They used predatory tactics on me."}],
               "case": {"company": row["Company"], "tags": ""}, "prior": {}}
    one = AGENTS["risk_assessor"][0](context)["rationale"]
    assert "= 1 point, so low" in one and "1 points" not in one, one
    context["evidence"][0]["text"] += " I called them five times about it."
    two = AGENTS["risk_assessor"][0](context)["rationale"]
    assert "= 2 points, so medium" in two, two


def test_a_request_to_stop_contact_reads_as_a_sentence_in_the_rationale_as_in_the_notice(analyst):
    """"The consumer asks for the calls and collection contact to stop", never "asks for stop the calls…"
    (seen on a real complaint): the rationale restates the request as the notice does."""
    row = _rows(1)[0]
    case = _case(analyst, row, late=False, extra="Please stop calling me at work. I want this to stop.")
    offline = _offline(case)
    assert offline["adjudication"]["summary"].count("The consumer asks for the calls and collection contact to stop.") == 1
    assert "asks for stop" not in offline["adjudication"]["summary"]
    assert "We understand that you are asking for the calls and collection contact to stop." in offline["notice"]["body"]


def test_with_no_signal_the_request_is_quoted_beside_the_request_not_after_no_risk(analyst):
    """Read on the second held-out set: "Risk low: no risk signal was found. The evidence says: “… I
    want them deleted from my credit file”" read as if the quotation were the evidence for "no risk".
    The consumer's request, quoted, now follows the request it shows."""
    wanted = "Please delete these two late payments from my credit report because they were paid on time."
    row = {**_rows(1)[0], "Consumer complaint narrative": "My car loan statements show two late payments in "
           "March and April. I paid both months on the due date and have the bank records. " + wanted}
    case = _case(analyst, row, late=False)
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    drive(services.run_start(actor=analyst, case=case))
    [rationale] = Proposal.objects.filter(case=case, kind="status_transition").values_list("rationale", flat=True)
    first, _rest = first_paragraph(rationale)
    assert f"The consumer asks for removal of the disputed items. In their words: “{wanted}” Risk low: no risk " \
           "signal was found." in first, first
    assert "The evidence says" not in first
