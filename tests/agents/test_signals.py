"""The narrative signals of agents/signals.py measured against the hand labels of
analyst/data/signals (RUBRIC.md says what each label means), and the rules behind the figures."""

from __future__ import annotations

import pytest

from agents import taxonomy
from agents.signals import detect_signals
from analyst.context import evidence_of
from analyst.evaluation import (
    NARRATIVE_SIGNALS,
    SIGNAL_TARGETS,
    read_rows,
    read_signal_labels,
    signal_figures,
)
from analyst.splits import split_of

ROWS = {row["Complaint ID"].strip(): row for row in read_rows(taxonomy.DATA_FILE)}
LABELS = read_signal_labels()
DETECTED = ("FRAUD-ID", "HARASSMENT", "URGENCY", "MONEY-LOSS", "TIME-LIMIT", "MISCONDUCT", "REPEAT-CONTACT",
            "OLDER-AM", "SCRA")  # MONEY-BACK is triage's (analyst/triage.py), measured by `evaluate`

# What the detectors reach on the held-out test split (46 complaints; the rules were written on the
# misses of train and dev only), as (found, labelled, flagged). Signals that meet the target
# (recall >= 80%, precision >= 70%) are held to it; the others are held to these counts as a floor
# that cannot regress. Few test complaints show most signals: TIME-LIMIT none, OLDER-AM one.
TEST_FIGURES = {
    "FRAUD-ID": (5, 8, 5),          # recall 62.5%: below the target
    "HARASSMENT": (2, 2, 2),
    "URGENCY": (2, 2, 3),           # precision 66.7%: below the target
    "MONEY-LOSS": (2, 4, 3),        # recall 50%, precision 66.7%: below the target
    "TIME-LIMIT": (0, 0, 0),        # no test complaint shows one, none flagged
    "MISCONDUCT": (16, 16, 16),
    "REPEAT-CONTACT": (10, 14, 10),  # recall 71.4%: below the target
    "OLDER-AM": (0, 1, 0),          # the one older consumer says only "I am old": missed
    "SCRA": (0, 0, 1),              # no servicemember on test; one false flag
}


def raised(complaint_id: str) -> set[str]:
    evidence = evidence_of({"evidence": [{"id": 1, "text": ROWS[complaint_id]["Consumer complaint narrative"]}]})
    return {s.code for s in detect_signals({}, [{"id": e.id, "text": e.text} for e in evidence])}


def figures_on(splits: tuple[str, ...]) -> dict[str, dict]:
    chosen = [cid for cid in ROWS if split_of(cid) in splits]
    pairs = [({code: LABELS[cid][code] for code in DETECTED}, raised(cid)) for cid in chosen]
    return {code: part for code, part in signal_figures(pairs).items() if code in DETECTED}


def test_each_signal_on_the_test_split_meets_the_target_or_holds_its_floor():
    figures = figures_on(("test",))
    for code, (found, labelled, flagged) in TEST_FIGURES.items():
        part = figures[code]
        assert part["labelled"] == labelled, code  # the labels are fixed: a change here is a relabelling
        assert part["found"] >= found, code
        assert part["flagged"] - part["found"] <= flagged - found, code  # no more false alarms
        if labelled and found / labelled >= SIGNAL_TARGETS["recall"] and (
                not flagged or found / flagged >= SIGNAL_TARGETS["precision"]):
            assert part["meets_target"], code


def test_over_every_split_each_signal_keeps_its_figures():
    """All 191 complaints (train and dev were tuned on, so these are not held-out figures)."""
    figures = figures_on(("train", "dev", "test"))
    floors = {"FRAUD-ID": (26, 32, 27), "HARASSMENT": (12, 12, 13), "URGENCY": (9, 9, 10), "MONEY-LOSS": (14, 16, 16),
              "TIME-LIMIT": (9, 10, 10), "MISCONDUCT": (56, 58, 59), "REPEAT-CONTACT": (54, 59, 56),
              "OLDER-AM": (0, 1, 0), "SCRA": (5, 5, 6)}
    for code, (found, labelled, flagged) in floors.items():
        part = figures[code]
        assert (part["labelled"], part["found"] >= found, part["flagged"] - part["found"] <= flagged - found) == (
            labelled, True, True), code


def test_every_detected_signal_has_labels_for_every_complaint():
    assert set(NARRATIVE_SIGNALS) >= set(DETECTED)
    assert all(set(LABELS[cid]) == set(NARRATIVE_SIGNALS) for cid in ROWS)


# --- the rules behind the figures -------------------------------------------------------------------
def signals_of(text: str) -> set[str]:
    return {s.code for s in detect_signals({}, [{"id": 1, "text": text}])}


@pytest.mark.parametrize(("text", "code"), [
    ("Nelnet provided false and misleading information about my forbearance.", "MISCONDUCT"),
    ("Collecting this debt is in violation of the FDCPA.", "MISCONDUCT"),
    ("They have acted predatorily and this is not right.", "MISCONDUCT"),
    ("I am being harrassed to pay every month.", "HARASSMENT"),
    ("They call me constantly about a loan I never had.", "HARASSMENT"),
    ("The dealer sent a repo agent to my house last night.", "URGENCY"),
    ("I am now past the settlement deadline for receiving full relief.", "TIME-LIMIT"),
    ("This account is far too old to be reported.", "TIME-LIMIT"),
    ("I have made repeated attempts to resolve this with the servicer.", "REPEAT-CONTACT"),
    ("I once again called and spoke to a representative.", "REPEAT-CONTACT"),
    ("This is my third time submitting a complaint about them.", "REPEAT-CONTACT"),
    ("My ex opened 3 accounts in my name while we were separated.", "FRAUD-ID"),
    ("I have never done business with this company.", "FRAUD-ID"),
    ("The vandal caused over {$2000.00} in damage to my car.", "MONEY-LOSS"),
    ("I wound up enlisting in the Army to pay for this.", "SCRA"),
])
def test_a_rule_of_the_rubric_is_found(text, code):
    assert code in signals_of(text)


@pytest.mark.parametrize(("text", "code"), [
    # "fraud" in a narrative that reports identity theft is the thief's, not the company's
    ("I am a victim of identity theft. The account was opened fraudulently.", "MISCONDUCT"),
    # a threat of a lawful step is time-critical harm, not harassment
    ("I am being threatened with wage garnishment.", "HARASSMENT"),
    # a lawsuit against the company, or one the consumer means to bring, is not harm to the consumer
    ("There is an ongoing class action lawsuit against the servicer.", "URGENCY"),
    ("I am preparing to start a lawsuit against the bureaus.", "URGENCY"),
    # a grant or a sum that only would be owed is not money lost
    ("To cover my fees I was granted a {$6800.00} scholarship.", "MONEY-LOSS"),
    ("If it had cleared twice, they would owe me {$8300.00} in fees.", "MONEY-LOSS"),
    # a consumer who complains about fraud alerts is not reporting identity theft
    ("The bureaus keep putting fraud alerts on my report without my permission.", "FRAUD-ID"),
    # a breach of information alone, with no account or charge in the consumer's name
    ("My personal information has been hacked by a third party.", "FRAUD-ID"),
])
def test_what_the_rubric_excludes_is_not_flagged(text, code):
    assert code not in signals_of(text)
