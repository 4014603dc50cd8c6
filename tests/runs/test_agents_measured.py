"""Agents worth listening to: calibrated triage within the CFPB taxonomy, signals with
quotes, the consumer's request, disputes where there is tension, re-planning on gaps, verified
citations, plain-words chat, and `manage.py evaluate` (measured on a fixed held-out slice)."""

from __future__ import annotations

import json
from datetime import date

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Tenant
from agents import taxonomy
from agents.signals import LEVELS, detect_signals, score
from analyst.agents import consumer_request
from analyst.context import evidence_of
from analyst.evaluation import select_rows
from analyst.provider import OfflineAnalyst
from analyst.registry import AGENTS
from analyst.splits import split_of
from cases import services as case_services
from cases.models import Case
from runs import services
from runs.models import AgentRun, Artifact, Finding, RunStatus
from runs.providers import ModelRequest
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import drive
from tests.runs.test_providers_offline import ROWS, context_for

CSV = str(taxonomy.DATA_FILE)


def ask(agent: str, context: dict):
    return OfflineAnalyst().complete(ModelRequest(agent=agent, output_schema=AGENTS[agent][1], context=context,
                                                  messages=[{"role": "user", "content": "analyse"}])).output


def signals_of(text: str) -> dict:
    return {s.code: s for s in detect_signals({}, [{"id": 5, "text": text}])}


# --- the taxonomy and triage ----------------------------------------------------------------------
def test_the_shipped_taxonomy_is_what_the_data_gives():
    assert json.loads(taxonomy.TAXONOMY_FILE.read_text()) == taxonomy.derive_taxonomy()
    assert "Student loan" in taxonomy.products() and "Incorrect information on your report" in taxonomy.issues()
    assert taxonomy.label_in_force("Credit card or prepaid card", date(2017, 4, 13)) == "Credit card"
    assert taxonomy.label_in_force("Credit card or prepaid card", date(2019, 1, 1)) == \
        "Credit card or prepaid card"


def test_triage_answers_only_taxonomy_labels_and_knows_when_it_is_unsure(settings):
    for complaint_id in list(ROWS)[::23]:
        output = ask("triage", context_for(complaint_id, keep_labels=False))
        assert output.product in taxonomy.products() and output.issue in taxonomy.issues_of(output.product)
        assert 0 <= output.confidence <= 1
    settings.ARBITER_TRIAGE_MIN_CONFIDENCE = 1.0
    unsure = ask("triage", context_for("3417710", keep_labels=False))
    assert unsure.needs_analyst
    settings.ARBITER_TRIAGE_MIN_CONFIDENCE = 0.0
    assert not ask("triage", context_for("3417710", keep_labels=False)).needs_analyst
    # A product the consumer recorded is not second-guessed into "needs an analyst".
    settings.ARBITER_TRIAGE_MIN_CONFIDENCE = 1.0
    assert not ask("triage", context_for("3417710")).needs_analyst


def test_the_respondent_company_is_evidence_for_the_product():
    from analyst.classifier import get_classifier

    model = get_classifier()
    text = "They are reporting an account that I do not recognise and will not fix it."
    bureau = model.product_probabilities(text, "TRANSUNION INTERMEDIATE HOLDINGS, INC.")
    servicer = model.product_probabilities(text, "MOHELA")
    credit = "Credit reporting, credit repair services, or other personal consumer reports"
    assert bureau[credit] > servicer[credit] and servicer["Student loan"] > bureau["Student loan"]


# --- the consumer's request ------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "kind", "statement", "quote"), [
    ("They charged me a late fee twice, {$1500.00} in total. I want a refund of {$1500.00}.", "refund",
     "A refund of $1,500.00", "I want a refund of {$1500.00}."),
    ("I am a victim of identity theft. These accounts are not mine. Please remove them from my report.",
     "removal", "Removal of the disputed items", "Please remove them from my report."),
    ("The collector calls me at work every day. The company does not have the right to harass me at work and "
     "I want this to stop.", "stop_contact", "Stop the calls and collection contact",
     "The company does not have the right to harass me at work and I want this to stop."),
    ("My payment posted late. They told me it was processed.", "none",
     "No specific request is stated in the evidence.", ""),
    # a sentence that only points back at a request ("what I am asking") asks for nothing itself
    ("I have written to them three times. It is crystal clear what I am asking.", "none",
     "No specific request is stated in the evidence.", ""),
    ("It is crystal clear what I am asking. Please remove the late payments from my report.", "removal",
     "Removal of the disputed items", "Please remove the late payments from my report."),
])
def test_consumer_request_has_a_kind_a_statement_and_an_exact_quote(text, kind, statement, quote):
    request = consumer_request(evidence_of({"evidence": [{"id": 5, "text": text}]}))
    assert (request["kind"], request["statement"], request["quote"]) == (kind, statement, quote)
    assert request["evidence_id"] == (5 if quote else None)
    assert request["quote"] in text


def test_triage_keeps_requested_remedy_next_to_the_consumer_request():
    output = ask("triage", context_for("17755119"))  # MOHELA refund never paid
    assert "refund" in output.requested_remedy.lower()
    assert output.consumer_request.kind == "refund" and output.consumer_request.evidence_id == 11
    assert output.consumer_request.quote in ROWS["17755119"]["Consumer complaint narrative"]


# --- signals ---------------------------------------------------------------------------------------
def test_harassment_is_a_signal_and_at_least_medium_risk():
    text = ("Over the past 2 weeks, I have been receiving excessive amounts of telephone calls from the company. "
            "They threatened to have me arrested. The company does not have the right to harass me at work.")
    found = signals_of(text)
    assert found["HARASSMENT"].quote == "Over the past 2 weeks, I have been receiving excessive amounts of " \
                                        "telephone calls from the company."
    level, _, explanation = score(list(found.values()))
    assert LEVELS.index(level) >= LEVELS.index("medium") and "HARASSMENT" in explanation


def test_identity_theft_is_told_apart_from_alleged_company_misconduct():
    school = signals_of("The school lied about job placement rates. This is fraud. I want my loans discharged.")
    assert "FRAUD-ID" not in school and "MISCONDUCT" in school
    victim = signals_of("I am a victim of identity theft. These accounts are not mine.")
    assert victim["FRAUD-ID"].quote == "I am a victim of identity theft."


def test_money_loss_needs_a_loss_context_and_states_the_amount():
    assert "MONEY-LOSS" not in signals_of("My balance is {$25000.00} and my credit limit is {$5000.00}.")
    loss = signals_of("They charged me a late fee twice, {$1500.00} in total.")["MONEY-LOSS"]
    assert "$1,500.00" in loss.description and loss.quote == "They charged me a late fee twice, {$1500.00} in total."


@pytest.mark.parametrize(("text", "code"), [
    ("It has been over 45 days since I disputed this and they have not responded.", "TIME-LIMIT"),
    ("This debt is time-barred and past the statute of limitations.", "TIME-LIMIT"),
    ("This account is over 7 years old and should not be on my report.", "TIME-LIMIT"),
    ("I am 67 years old and retired, living on Social Security income.", "OLDER-AM"),
    ("I am on active duty in the U.S. Army and was deployed overseas.", "SCRA"),
    ("I am a 71 year old widow and they keep calling me.", "OLDER-AM"),
    ("I'm retired and living on a fixed income, so this fee hurts.", "OLDER-AM"),
    ("We bought the house with a VA loan after my husband left the service.", "SCRA"),
    ("I received PCS orders and asked them to pause the account.", "SCRA"),
    ("I called them 6 times and sent three letters, with no answer.", "REPEAT-CONTACT"),
])
def test_narrative_signals_with_their_quotes(text, code):
    signal = signals_of(text)[code]
    assert signal.quote and signal.quote in text and signal.evidence_id == 5


@pytest.mark.parametrize("text", [
    "My account is 90 days past due and 60 days late on my report.",  # delinquency, not a legal window
    "I am 45 years old.",  # not an older American
    "I am a 25 year old student and retired my old card.",  # young; "retired" a card, not the consumer
    "Someone used my Social Security number to open the account.",  # the number, not the benefit
    "On 01/02/2020 I paid. On 02/02/2020 I paid. On 03/02/2020 I paid. On 04/02/2020 I paid.",  # dates, no contact
])
def test_no_signal_without_what_it_means(text):
    assert not {"TIME-LIMIT", "OLDER-AM", "REPEAT-CONTACT"} & set(signals_of(text))


@pytest.mark.parametrize("text", [
    "I live in VA and my loan payment was misapplied.",  # Virginia, not Veterans Affairs
    "They put me on hold and a representative hung up on me.",
])
def test_no_servicemember_signal_without_service(text):
    assert "SCRA" not in signals_of(text)


def test_every_tagged_complaint_whose_narrative_mentions_the_status_is_found_and_precision_holds():
    """Over the whole sample (the rules are written, not learnt): servicemember and older-American
    status are found in every tagged complaint whose narrative says anything about it. Most tagged
    narratives say nothing (22 Servicemember tags, 4 mention service; 4 Older American tags, none
    mentions age), so recall against every tag stays low: only the case record's tag finds those."""
    from analyst.evaluation import TAG_SIGNALS, row_tags, status_mentions

    rows = select_rows(list(ROWS.values()), split="all")
    for code, tag in TAG_SIGNALS:
        flagged = [r for r in rows if code in signals_of(r["Consumer complaint narrative"])]
        stated = [r for r in rows if tag in row_tags(r) and tag in status_mentions(r["Consumer complaint narrative"])]
        assert all(r in flagged for r in stated)
        assert sum(tag in row_tags(r) for r in flagged) >= 0.8 * len(flagged)  # SCRA: 5 of 6 flagged are tagged
    assert len([r for r in rows if "SCRA" in signals_of(r["Consumer complaint narrative"])]) == 6


def test_evaluation_tells_tagged_complaints_that_mention_the_status_from_those_that_do_not():
    from analyst.evaluation import status_mentions

    assert status_mentions("My husband was deployed with the Army.") == {"Servicemember"}
    assert status_mentions("I am 67 and retired.") == {"Older American"}
    assert status_mentions("Someone used my Social Security number.") == set()
    assert status_mentions("b'I am a veteran.'") == {"Servicemember"}  # the bytes-literal narrative decoded


# --- disputes and re-planning ---------------------------------------------------------------------
def test_adjudicator_disputes_low_triage_confidence_and_a_product_the_narrative_contradicts():
    context = context_for("3417710", keep_labels=False, status="new")
    context["prior"]["triage"] = {"product": "Student loan", "issue": "Getting a loan", "confidence": 0.31,
                                  "needs_analyst": True}
    adjudication = ask("adjudicator", context)
    topics = [d.topic for d in adjudication.disputes]
    assert "triage confidence" in topics and "transition" in topics
    assert adjudication.recommended_transition is None  # not triaged before an analyst classifies it
    recorded = context_for("3417710", product="Student loan")
    recorded["prior"]["triage"] = {"product": "Student loan", "issue": "x", "confidence": 0.8,
                                   "narrative_product": "Credit reporting, credit repair services, or other "
                                                        "personal consumer reports"}
    [product] = [d for d in ask("adjudicator", recorded).disputes if d.topic == "product"]
    assert "Credit reporting" in product.positions[1]
    confident = context_for("3417710")
    confident["prior"]["triage"] = {"product": ROWS["3417710"]["Product"], "issue": "x", "confidence": 0.9}
    assert not [d for d in ask("adjudicator", confident).disputes if d.topic in ("product", "triage confidence")]


def test_reflect_replans_only_for_a_gap_it_can_fill():
    adjudication = {"summary": "s", "risk_level": "medium", "recommended_transition": None, "confidence": 0.9,
                    "disputes": []}
    assert not ask("reflect", {"prior": {"adjudicator": adjudication}}).replan
    unquoted = {"adjudicator": adjudication, "risk_assessor": {"signals": [
        {"code": "FRAUD-ID", "description": "x", "evidence_id": 3, "quote": ""}]}}
    output = ask("reflect", {"prior": unquoted})
    assert output.replan and output.revisit == ["risk_assessor", "adjudicator"] and "FRAUD-ID" in output.reason
    unread = ask("reflect", {"prior": {"adjudicator": adjudication},
                             "evidence": [{"id": 4, "text": "[application/pdf file statement.pdf, 1200 bytes]"}]})
    assert unread.replan and "E4" in unread.reason and "evidence_analyst" in unread.revisit


# --- chat in plain words ------------------------------------------------------------------------------
def _chat(question: str, complaint_id: str = "17755119", **extra) -> str:
    from tests.runs.test_providers_offline import PIPELINE, run_pipeline

    context = context_for(complaint_id, **extra)
    outputs = run_pipeline(context)
    context["artifacts"] = [{"id": 100 + n, "kind": agent, "content": outputs[agent].output.model_dump()}
                            for n, agent in enumerate(PIPELINE)]
    context["notices"] = [{"id": 9, "status": "pending_approval", "kind": "response"}]
    context["question"] = question
    context["thread"] = {"summary": None, "recent": []}
    return ask("chat", context)


def test_chat_says_what_the_consumer_wants_why_the_risk_and_what_is_due_in_plain_words():
    wants = _chat("What does the consumer want?").answer
    assert "The consumer asks for: A refund" in wants and "In their words: “" in wants
    why = _chat("Why high risk?", complaint_id="3417710").answer
    assert "identity theft (+3)" in why and "“Consumer narrative”" in why
    due = _chat("What's due and when?").answer
    assert "a response to the consumer by" in due and "a decision on the case by" in due
    notice = _chat("Where is the notice?").answer
    for raw in ("pending_approval", "ACK-15", "CLOSE-60", "E11", "N9", "[risk_level]"):
        assert raw not in wants + why + due + notice
    assert "waiting for a supervisor's approval" in notice


def test_chat_draft_a_notice_is_an_intent_to_draft():
    reply = _chat("Draft a notice to the consumer.")
    assert [i.kind for i in reply.intents] == ["draft_notice"]
    # The context already holds a notice waiting for approval: the answer says so, and promises nothing.
    assert ("already exists (waiting for a supervisor's approval), so I will not draft another"
            in reply.answer)
    assert "I will draft" not in reply.answer


# --- citations, end to end -------------------------------------------------------------------------
@pytest.mark.django_db
def test_citations_are_verified_against_the_evidence_text(analyst):
    from agents.citations import EvidenceTexts, verify_citations

    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="t",
                                     narrative="I was charged\n  twice for the same payment. I want a refund.")
    evidence_id = case.evidence.get().pk
    check = verify_citations(EvidenceTexts(case), [
        {"evidence_id": evidence_id, "quote": "I was charged twice for the same payment."},  # whitespace folded
        {"evidence_id": evidence_id, "quote": "I was charged three times."},  # invented
        {"evidence_id": evidence_id + 999, "quote": "I want a refund."},  # not this case's evidence
    ])
    assert [c["quote"] for c in check.verified] == ["I was charged twice for the same payment."]
    assert [d["reason"] for d in check.dropped] == [f"the quote does not occur in E{evidence_id}",
                                                    f"E{evidence_id + 999} is not evidence of this case"]


# --- manage.py evaluate ----------------------------------------------------------------------------
def test_the_split_is_a_fixed_hash_of_the_complaint_id():
    assert split_of("3417710") == split_of(" 3417710 ") and {split_of(str(i)) for i in range(200)} == {
        "train", "dev", "test"}
    test_rows = select_rows(list(ROWS.values()), split="test")
    assert 40 <= len(test_rows) <= 55 and all(split_of(r["Complaint ID"]) == "test" for r in test_rows)


@pytest.mark.django_db(transaction=False)
def test_evaluate_on_a_fixed_held_out_slice_meets_its_minimums_and_leaves_nothing(tmp_path, case):
    out = tmp_path / "figures.json"
    with assert_nothing_changed(case, extra={"cases": Case.objects.count, "tenants": Tenant.objects.count,
                                             "runs": AgentRun.objects.count, "findings": Finding.objects.count}):
        call_command("evaluate", CSV, "--split", "test", "--json", str(out))
    figures = json.loads(out.read_text())
    assert figures["complaints"] == 46 and figures["runs"] == {RunStatus.COMPLETED: 46}
    # Measured on the 46 held-out complaints (a classifier of the train side only; docs/adr/0011): product
    # 43/46 = 93.5%, macro recall 89.3% over its 6 products (Debt collection 1/2, credit reporting 8/9,
    # student loan 29/30, the rest all right), issue 24/46 = 52.2%. Before the classifier also learnt from
    # the signal sets' complaints (docs/adr/0036) it read 45/46 products and 22/46 issues
    # here, and 74.5% of products, 31.0% of issues with ECE 0.19 on the 200 held-out narratives that no
    # model saw (77.0%, 40.0%, ECE 0.085 now): two products of these 46 went for 5 products and 18 issues
    # of those 200, and the floors below moved with them.
    assert figures["product"]["accuracy"] >= 0.93 and figures["product"]["macro_recall"] >= 0.89
    assert figures["issue"]["accuracy"] >= 0.52 > figures["issue"]["majority_baseline"]
    assert figures["notices"]["drafts"] == 46 and figures["notices"]["flags"] == 0
    disputes = figures["disputes"]
    # Disputes on triage exactly where its confidence is low.
    assert disputes["needs_analyst_with_dispute"] == disputes["needs_analyst"]
    assert disputes["dispute_on_triage_when_confident"] == 0
    assert figures["seconds_per_analysis"]["median"] < 5


@pytest.mark.django_db
def test_evaluate_refuses_bad_input_and_changes_nothing(tmp_path, case):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with assert_nothing_changed(case, extra={"cases": Case.objects.count}):
        with pytest.raises(CommandError, match="No file"):
            call_command("evaluate", str(tmp_path / "missing.csv"))
        with pytest.raises(CommandError, match="missing column"):
            call_command("evaluate", str(bad))
        with pytest.raises(CommandError, match="--limit"):
            call_command("evaluate", CSV, "--limit", "0")


# --- the graph keeps the dispute and the dropped citations ------------------------------------------
def _analysed(analyst, row: dict):
    """A case of `row`'s complaint, triaged, and its analysis driven to the end."""
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Complaint",
                                     narrative=row["Consumer complaint narrative"], company=row["Company"],
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    return drive(services.run_start(actor=analyst, case=case, enqueue=False))


@pytest.mark.django_db
def test_a_low_confidence_triage_is_disputed_and_the_dispute_is_kept(analyst, settings):
    settings.ARBITER_TRIAGE_MIN_CONFIDENCE = 1.0  # every triage is below it
    run = _analysed(analyst, ROWS["3417710"])
    assert run.status == RunStatus.COMPLETED, run.error
    triage = Finding.objects.get(run=run, type="triage")
    assert triage.summary.startswith("Needs an analyst") and triage.data["needs_analyst"] is True
    dispute = Artifact.objects.get(run=run, kind="dispute", content__topic="triage confidence")
    assert dispute.content["resolution"].startswith("Needs an analyst")
    assert Finding.objects.filter(run=run, type="dispute", summary__startswith="Dispute on the triage confidence").exists()


def test_the_evaluation_model_and_the_shipped_model_never_share_a_cache(settings, tmp_path, shipped_classifier):
    from analyst import classifier

    settings.ARBITER_ANALYST_DIR = tmp_path
    (tmp_path / shipped_classifier.path.name).write_bytes(shipped_classifier.path.read_bytes())
    classifier.clear_cache()
    with classifier.training_scope(("train",)):
        scoped = classifier.get_classifier()  # evaluation trains its own, in-process
    shipped = classifier.get_classifier()
    assert scoped.trained_on < shipped.trained_on == 191 + 628  # the sample and the signal sets (ADR 0036)
    assert sorted(p.name.split("-")[2] for p in tmp_path.glob("*.pkl")) == ["train", f"v{classifier.code_version()}.pkl"]
    classifier.clear_cache()
    with classifier.training_scope(("train",)):
        assert classifier.get_classifier().trained_on == scoped.trained_on  # from its own file
    assert classifier.get_classifier().trained_on == 191 + 628
    classifier.clear_cache()


@pytest.mark.django_db
def test_evaluate_counts_the_notice_checkers_flags_on_each_draft(tmp_path):
    """The figures count the real checker's flags on every agent draft (the notice checker): a
    stand-in check that flags acknowledgements is seen on each of them, and the offline drafter's
    own drafts carry none."""
    out = tmp_path / "figures.json"
    call_command("evaluate", CSV, "--split", "dev", "--limit", "2", "--json", str(out))
    clean = json.loads(out.read_text())["notices"]
    assert clean["checker"] == "available" and clean["drafts"] == 2 and clean["flags"] == 0


    # A draft whose stored check is for older text is checked afresh; a current one is counted as stored.
    import types

    from analyst.evaluation import _flags_of

    seen = []

    def flag_everything(*, case, recipient, subject, body, consumer_request=None):
        seen.append((recipient, subject, consumer_request))
        return [{"code": "past_date", "message": "x"}]

    stale = types.SimpleNamespace(checked_hash="old", content_hash="new", check_flags=[], recipient="c@example.org",
                                  subject="S", body="B")
    current = types.SimpleNamespace(checked_hash="h", content_hash="h", check_flags=[{}, {}], recipient="", subject="",
                                    body="")
    assert _flags_of(flag_everything, stale, None, {"statement": "A refund"}) == 1
    assert _flags_of(flag_everything, current, None) == 2
    assert seen == [("c@example.org", "S", {"statement": "A refund"})]




def test_a_notice_leaves_out_the_agents_labels_when_triage_needs_an_analyst():
    """Below the confidence threshold the drafter names only what the case records."""
    from analyst.agents import notice_drafter

    case = {"reference": "CASE-2026-000001", "company": "Acme Bank", "product": "", "issue": "",
            "received_at": "2026-11-20", "status": "triaged"}
    triage = {"product": "Mortgage", "issue": "Trouble during payment process", "needs_analyst": True}
    unsure = notice_drafter({"case": case, "prior": {"triage": triage}})
    assert "Mortgage" not in unsure["body"] and "trouble during payment" not in unsure["body"].lower()
    sure = notice_drafter({"case": case, "prior": {"triage": triage | {"needs_analyst": False}}})
    assert "Mortgage" in sure["body"]


# --- prior knowledge: product cues and the respondent's line of business -------------------------
@pytest.mark.parametrize(("company", "products"), [
    ("TRANSUNION INTERMEDIATE HOLDINGS, INC.", {"Credit reporting, credit repair services, or other personal "
                                               "consumer reports"}),
    ("Portfolio Recovery Associates, LLC", {"Debt collection"}),
    ("SYNCHRONY FINANCIAL", {"Credit card or prepaid card"}),
    ("Nationstar Mortgage LLC d/b/a Mr. Cooper", {"Mortgage"}),
    ("Paypal Holdings, Inc", {"Money transfer, virtual currency, or money service"}),
    ("Navient Solutions, LLC.", {"Student loan"}),
    ("Acme Widgets", set()),
])
def test_a_respondents_known_line_of_business(company, products):
    from analyst.classifier import normalise_company
    from analyst.cues import company_lines

    assert company_lines(normalise_company(company)) == products


def test_a_bank_is_evidence_for_each_of_its_lines_but_not_for_student_loans():
    from analyst.classifier import normalise_company
    from analyst.cues import company_lines

    lines = company_lines(normalise_company("WELLS FARGO & COMPANY"))
    assert {"Checking or savings account", "Credit card or prepaid card", "Mortgage"} <= lines
    assert "Student loan" not in lines and "Debt collection" not in lines


@pytest.fixture(scope="module")
def train_only_model():
    from analyst.classifier import ComplaintClassifier, load_examples

    return ComplaintClassifier([e for e in load_examples() if split_of(e.complaint_id) == "train"], calibrate=False)


def test_a_respondent_never_seen_in_training_speaks_for_its_line_of_business(train_only_model):
    text = "They sent me a letter about an account and I do not recognise it."
    collector = "ENHANCED RECOVERY COMPANY, LLC"
    assert not any("enhanced recovery" in key for key in train_only_model.company_mix)  # never seen in training
    with_line = train_only_model.product_probabilities(text, collector)["Debt collection"]
    assert with_line > 0.5 > train_only_model.product_probabilities(text, "")["Debt collection"]


def test_a_rare_product_is_named_by_its_taxonomy_words(train_only_model):
    """One credit-card complaint in training: the words of the product's own taxonomy name it."""
    text = ("My credit card APR went up after the promotional period ended and I was charged an annual fee "
            "on the statement balance.")
    assert train_only_model.predict(text, "", date(2019, 5, 1))["product"].label == "Credit card or prepaid card"
    # Before 2017-04-24 the same complaint was filed under the product then in force.
    assert train_only_model.predict(text, "", date(2017, 1, 5))["product"].label == "Credit card"
    mortgage = "My escrow account was short and the servicer started foreclosure while my loan modification was pending."
    assert train_only_model.predict(mortgage)["product"].label == "Mortgage"


def test_the_tuning_harness_never_reads_the_test_split():
    from analyst.tuning import tuning_examples

    sides = tuning_examples()
    assert set(sides) == {"train", "dev"} and all(split_of(e.complaint_id) == side
                                                   for side, examples in sides.items() for e in examples)
    assert sum(len(examples) for examples in sides.values()) == len(select_rows(list(ROWS.values()), split="all")) \
        - len(select_rows(list(ROWS.values()), split="test"))


@pytest.mark.django_db
def test_a_triage_that_asks_for_a_person_while_confident_says_so_not_that_it_is_below(analyst, monkeypatch):
    """A model may flag needs_analyst at confidence 1.00 (Gemma 3 270M did): the finding says the agent
    asked for a person's check, never "confidence 1.00 is below 0.60"."""
    answer, schema = AGENTS["triage"]

    def asks_for_a_person(context):
        return answer(context) | {"needs_analyst": True, "confidence": 1.0}

    monkeypatch.setitem(AGENTS, "triage", (asks_for_a_person, schema))
    run = _analysed(analyst, ROWS["3417710"])
    triage = Finding.objects.filter(run=run, type="triage").first()
    assert triage is not None and triage.summary.startswith("Needs an analyst"), triage
    assert "is below" not in triage.summary and "the triage agent asked for a person's check" in triage.summary
