"""The sentence reader of the narrative signals (analyst.signal_reader) beside the rules."""

import csv
import pickle

import pytest

from agents.citations import code_words
from agents.signals import POINTS, detect_signals
from agents.text import clean_narrative
from analyst import classifier, signal_sets
from analyst.agents import notice_drafter, read_signals, risk_assessor
from analyst.context import evidence_of
from analyst.evaluation import read_rows, read_signal_labels, signal_figures
from analyst.signal_reader import THRESHOLDS, SentenceReader, _features
from analyst.splits import split_of
from tests.agents.test_signals import DETECTED, HELDOUT2_FIGURES, HELDOUT3_FIGURES, assert_target_or_floor

HELDOUT2_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(signal_sets.HELDOUT2_CSV)}
HELDOUT2 = read_signal_labels(signal_sets.HELDOUT2_LABELS)
HELDOUT3_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(signal_sets.HELDOUT3_CSV)}
HELDOUT3 = read_signal_labels(signal_sets.HELDOUT3_LABELS)

# Rules and the shipped sentence reader together on the third held-out set, which nothing was tuned or trained
# on (the reader learns from every other labelled set, both earlier held-out sets included; its thresholds were
# fixed on the blind set): (found, labelled, flagged), as `evaluate --split heldout3` reports them. Before the
# sixth addendum (ADR 0032: the rules widened on the second held-out set's misses, the reader trained on it too)
# the pair read FRAUD-ID 51/63 (51 of 72 flagged), HARASSMENT 1/1 (1/2), URGENCY 8/10 (8/11), MONEY-LOSS 4/10
# (4/7), TIME-LIMIT 10/18 (10/13), MISCONDUCT 35/46 (35/52), REPEAT-CONTACT 38/49 (38/52), the rest as now:
# identity theft and time-critical harm met the target; one more false alarm took the second below it. The set
# is too thin to measure harassment, servicemembers and older consumers.
HELDOUT3_WITH_READER = {
    "FRAUD-ID": (53, 63, 70),         # recall 84.1%, precision 75.7%
    "HARASSMENT": (1, 1, 3),          # precision 33.3%, on one labelled narrative
    "URGENCY": (8, 10, 12),           # recall 80.0%, precision 66.7%
    "MONEY-LOSS": (5, 10, 8),         # recall 50.0%
    "TIME-LIMIT": (11, 18, 14),       # recall 61.1%, precision 78.6%
    "MISCONDUCT": (35, 46, 51),       # recall 76.1%, precision 68.6%
    "REPEAT-CONTACT": (39, 49, 53),   # recall 79.6%, precision 73.6%
    "OLDER-AM": (0, 4, 0),            # rules only
    "SCRA": (0, 0, 1),                # rules only
}
# The same on the second held-out set: measured untouched once (FRAUD-ID 38/45 of 51 flagged, HARASSMENT 12/20
# of 13, URGENCY 16/21 of 20, MONEY-LOSS 8/11 of 14, TIME-LIMIT 6/10 of 8, MISCONDUCT 38/54 of 48, REPEAT-CONTACT
# 68/85 of 78, OLDER-AM 1/3 of 2, SCRA 4/5 of 5); the reader learns from it now, so these are training figures.
HELDOUT2_WITH_READER = {
    "FRAUD-ID": (45, 45, 53),
    "HARASSMENT": (20, 20, 21),
    "URGENCY": (21, 21, 26),
    "MONEY-LOSS": (9, 11, 11),
    "TIME-LIMIT": (10, 10, 12),
    "MISCONDUCT": (54, 54, 58),
    "REPEAT-CONTACT": (85, 85, 89),
    "OLDER-AM": (1, 3, 2),
    "SCRA": (4, 5, 5),
}
# A narrative of the second tuning set (trained on) whose identity theft no rule words: "This collection that
# wasn't even supposed to be mine".
READER_ONLY = ("3172646", "FRAUD-ID")


def narrative(path, complaint_id: str) -> str:
    with open(path, newline="", encoding="utf-8") as handle:
        row = next(r for r in csv.DictReader(handle) if r["Complaint ID"].strip() == complaint_id)
    return row["Consumer complaint narrative"]


def test_the_reader_learns_from_every_labelled_set_but_the_third_held_out_one(shipped_classifier):
    every = signal_sets.training_narratives()
    # One consumer's letter, filed under several Complaint IDs, is two of the third held-out set's narratives
    # and repeats word for word in the second tuning set (twice), the first held-out set (once) and the second
    # (twice); an identity-theft template letter is two of its narratives and one of the sample's: those six go.
    assert len(every) == 191 + 300 + 160 + 210 + 200 + 193 - 6
    held_out = {clean_narrative(row["Consumer complaint narrative"]) for row in HELDOUT3_ROWS.values()}
    assert not held_out & {text for text, _ in every}
    # Scoped for evaluating the sample's test split: that split's narratives are left out.
    scoped = signal_sets.training_narratives(("train", "dev"))
    test_side = sum(split_of(cid) == "test" for cid in read_signal_labels())
    assert len(scoped) == len(every) - test_side and test_side > 0
    assert classifier.get_classifier().signal_reader.trained_on == len(every)


@pytest.mark.parametrize(("rows", "labels", "with_reader", "rules_alone"), [
    (HELDOUT3_ROWS, HELDOUT3, HELDOUT3_WITH_READER, HELDOUT3_FIGURES),
    (HELDOUT2_ROWS, HELDOUT2, HELDOUT2_WITH_READER, HELDOUT2_FIGURES),
], ids=["third held-out set", "second held-out set"])
def test_rules_and_reader_on_a_held_out_set_meet_the_target_or_hold_their_floor(shipped_classifier, rows, labels,
                                                                                 with_reader, rules_alone):
    pairs = []
    for cid, row in rows.items():
        evidence = evidence_of({"evidence": [{"id": 1, "text": row["Consumer complaint narrative"]}]})
        pairs.append(({code: labels[cid][code] for code in DETECTED}, {s.code for s in read_signals({}, evidence)}))
    figures = {code: part for code, part in signal_figures(pairs).items() if code in DETECTED}
    assert_target_or_floor(figures, with_reader)
    # The reader adds signals; it never takes one the rules found away.
    for code, (found, _labelled, _flagged) in rules_alone.items():
        assert figures[code]["found"] >= found, code


def test_a_signal_only_the_reader_finds_cites_a_sentence_of_the_evidence_and_says_it_is_learned(shipped_classifier):
    complaint, code = READER_ONLY
    text = narrative(signal_sets.TUNING2_CSV, complaint)
    context = {"case": {}, "evidence": [{"id": 7, "title": "Complaint narrative", "text": text}]}
    assert code not in {s.code for s in detect_signals({}, [{"id": 7, "text": clean_narrative(text)}])}
    signal = next(s for s in read_signals({}, evidence_of(context)) if s.code == code)
    assert signal.evidence_id == 7 and signal.quote and signal.quote in clean_narrative(text)
    assert "as the sentence model reads it" in signal.description
    answer = risk_assessor(context)
    first = answer["rationale"].split("\n\n")[0]
    assert answer["risk_level"] in ("high", "critical")  # identity theft's floor holds for a learned reading
    assert "identity theft, as the sentence model reads it" in first and "FRAUD-ID" not in first
    assert f"FRAUD-ID +3 ({code_words('FRAUD-ID')}; E7)" in answer["rationale"]


def test_a_notice_tells_the_consumer_only_what_the_rules_found(shipped_classifier):
    """A signal only the sentence reader found is the supervisor's lead: the notice does not tell
    the consumer "you tell us that accounts … were opened … by someone else" on its strength."""
    told = "opened or used in your name by someone else"
    case = {"reference": "CASE-2026-000001", "company": "Acme Bank", "received_at": "2026-11-20", "status": "triaged"}
    learned = {"case": case, "evidence": [{"id": 7, "text": narrative(signal_sets.TUNING2_CSV, READER_ONLY[0])}]}
    learned["prior"] = {"risk_assessor": risk_assessor(learned)}
    assert "FRAUD-ID" in {s["code"] for s in learned["prior"]["risk_assessor"]["signals"]}
    assert told not in notice_drafter(learned)["body"]
    ruled = {"case": case, "evidence": [{"id": 3, "text": "Someone opened a credit card in my name without my "
                                                           "knowledge. This is identity theft."}]}
    ruled["prior"] = {"risk_assessor": risk_assessor(ruled)}
    assert told in notice_drafter(ruled)["body"]


def test_when_rule_and_reader_both_see_a_code_the_rule_is_cited(shipped_classifier):
    text = "Someone opened a credit card in my name without my knowledge. This is identity theft."
    evidence = evidence_of({"evidence": [{"id": 3, "text": text}]})
    rule = next(s for s in detect_signals({}, [{"id": 3, "text": text}]) if s.code == "FRAUD-ID")
    reader = classifier.get_classifier().signal_reader
    assert any(s.code == "FRAUD-ID" for s in reader.signals(3, text))
    assert next(s for s in read_signals({}, evidence) if s.code == "FRAUD-ID") == rule


def test_the_reader_reads_amounts_as_over_or_under_the_money_lost_line():
    assert _features("I lost {$5000.00} and $1,200 to fees, then {$50.00}.").split() == [
        "I", "lost", "amountover", "and", "amountover", "to", "fees,", "then", "amountunder", "."]
    assert _features("They took $2k, not {$1000.00}.").split() == ["They", "took", "amountover", ",", "not",
                                                                   "amountunder", "."]


def test_a_signal_with_no_positive_sentence_gets_no_model():
    narratives = [("I lost {$5000.00} to their fee.", {"MONEY-LOSS": "I lost {$5000.00} to their fee."}),
                  ("I paid {$50.00} for the statement.", {}), ("They called me at work.", {})] * 2
    reader = SentenceReader(narratives)
    assert set(reader.models) == {"MONEY-LOSS"}
    assert set(reader.scores("They took {$7200.00} from me.")) == {"MONEY-LOSS"}


def test_an_artifact_without_the_reader_is_not_loaded(shipped_classifier, tmp_path):
    artifact = classifier.artifact_for()
    with open(artifact.path, "rb") as handle:
        payload = pickle.load(handle)  # noqa: S301 - the suite's own artifact
    payload["model"].signal_reader = None
    stale = artifact.path.with_name("classifier-stale-test.pkl")
    try:
        with open(stale, "wb") as handle:
            pickle.dump(payload, handle)
        assert classifier.load_artifact(type(artifact)(path=stale, source=artifact.source,
                                                       data_sha256=artifact.data_sha256,
                                                       code_version=artifact.code_version)) is None
    finally:
        stale.unlink(missing_ok=True)


def test_every_learned_signal_is_one_the_scoring_table_knows_and_not_one_left_to_the_rules():
    assert set(THRESHOLDS) <= set(POINTS) and not set(THRESHOLDS) & {"OLDER-AM", "SCRA"}
