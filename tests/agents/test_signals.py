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
from analyst.signal_sets import (
    BLIND_CSV,
    BLIND_LABELS,
    HELDOUT2_CSV,
    HELDOUT2_LABELS,
    HELDOUT3_CSV,
    HELDOUT3_LABELS,
    HELDOUT_CSV,
    HELDOUT_LABELS,
    TUNING2_CSV,
    TUNING2_LABELS,
    TUNING_CSV,
    TUNING_LABELS,
)
from analyst.splits import split_of

ROWS = {row["Complaint ID"].strip(): row for row in read_rows(taxonomy.DATA_FILE)}
LABELS = read_signal_labels()
BLIND_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(BLIND_CSV)}
BLIND = read_signal_labels(BLIND_LABELS)
TUNING_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(TUNING_CSV)}
TUNING = read_signal_labels(TUNING_LABELS)
TUNING2_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(TUNING2_CSV)}
TUNING2 = read_signal_labels(TUNING2_LABELS)
HELDOUT_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(HELDOUT_CSV)}
HELDOUT = read_signal_labels(HELDOUT_LABELS)
HELDOUT2_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(HELDOUT2_CSV)}
HELDOUT2 = read_signal_labels(HELDOUT2_LABELS)
HELDOUT3_ROWS = {row["Complaint ID"].strip(): row for row in read_rows(HELDOUT3_CSV)}
HELDOUT3 = read_signal_labels(HELDOUT3_LABELS)
DETECTED = ("FRAUD-ID", "HARASSMENT", "URGENCY", "MONEY-LOSS", "TIME-LIMIT", "MISCONDUCT", "REPEAT-CONTACT",
            "OLDER-AM", "SCRA")  # MONEY-BACK is triage's (analyst/triage.py), measured by `evaluate`

# What the detectors reach on the old test split (46 complaints), as (found, labelled, flagged).
# The rules were first written on the misses of train and dev only; since the blind set
# (analyst/data/signals/blind/) took over as the held-out side, all 191 old narratives, this split
# included, are tuning data (ADR 0032, addendum), so these are floors, not held-out figures.
# Signals that meet the target (recall >= 80%, precision >= 70%) are held to it; the
# others to these counts. Few test complaints show most signals: TIME-LIMIT none, OLDER-AM one.
TEST_FIGURES = {
    "FRAUD-ID": (8, 8, 8),
    "HARASSMENT": (2, 2, 2),
    "URGENCY": (2, 2, 3),           # precision 66.7%: below the target
    "MONEY-LOSS": (4, 4, 5),
    "TIME-LIMIT": (0, 0, 0),        # no test complaint shows one, none flagged
    "MISCONDUCT": (16, 16, 16),
    "REPEAT-CONTACT": (13, 14, 13),
    "OLDER-AM": (0, 1, 0),          # the one older consumer says only "I am old": missed
    "SCRA": (0, 0, 1),              # no servicemember on test; one false flag
}


# The blind set (300 narratives of 2023, labelled and committed before any detector ran on them,
# never tuned on; analyst/data/signals/blind/SOURCE.md), read once after each round of rule changes
# made on other narratives only: first the old 191, then the tuning set (ADR 0032, addenda). Same
# convention: the target where met, these counts otherwise. MISCONDUCT found 92 at the first reading
# and 89 at the second (the rules were not changed after it; see the second addendum). The third reading,
# after the rules were widened on the second tuning set, raised REPEAT-CONTACT from 46 to 49 found with no
# more false alarms; FRAUD-ID (68 found, 7 flagged wrongly) and MISCONDUCT (90 found, 38 flagged wrongly) took
# one false alarm more each and went back to their earlier rules, so their figures are the second reading's.
# The fifth addendum widened the rules on the blind set's misses too (with the first held-out set's): these
# are tuning figures now, and every widening that added a false alarm on any labelled set was taken back.
BLIND_FIGURES = {
    "FRAUD-ID": (83, 101, 89),        # recall 82.2%, precision 93.3% (68 of 74 flagged before the fifth addendum)
    "HARASSMENT": (4, 4, 5),          # precision 80% (3 of 4 before)
    "URGENCY": (12, 13, 13),          # (9 of 10 before)
    "MONEY-LOSS": (13, 21, 17),       # recall 61.9%: below the target (4 of 8 before)
    "TIME-LIMIT": (46, 49, 48),       # (37 of 39 before)
    "MISCONDUCT": (89, 107, 119),     # recall 83.2%, precision 74.8% (89 of 126 before)
    "REPEAT-CONTACT": (61, 79, 62),   # recall 77.2%: below the target (49 of 50 before)
    "OLDER-AM": (1, 2, 1),            # recall 50%: below the target
    "SCRA": (4, 5, 4),
}


# The tuning set (160 further narratives, labelled and committed before any detector ran on them;
# analyst/data/signals/tuning/SOURCE.md): the rules were widened on its misses and false alarms, so
# these are tuning figures, held as floors like the others.
TUNING_FIGURES = {
    "FRAUD-ID": (50, 51, 54),
    "HARASSMENT": (10, 10, 10),
    "URGENCY": (9, 9, 11),
    "MONEY-LOSS": (3, 3, 4),
    "TIME-LIMIT": (22, 22, 23),
    "MISCONDUCT": (56, 57, 60),
    "REPEAT-CONTACT": (45, 47, 47),
    "OLDER-AM": (3, 3, 3),
    "SCRA": (1, 1, 1),
}


# The second tuning set (210 further narratives, labelled and committed before any detector ran on them;
# analyst/data/signals/tuning2/SOURCE.md). Before the rules were widened on it the detectors found FRAUD-ID 27/46
# (27 of 34 flagged), HARASSMENT 9/14 (9/10), URGENCY 9/20 (9/10), MONEY-LOSS 3/7 (3/11), TIME-LIMIT 6/18 (6/8),
# MISCONDUCT 42/55 (42/50), REPEAT-CONTACT 34/60 (34/38), OLDER-AM 1/2 (1/1), SCRA 3/4 (3/4); these are the
# figures after, tuning figures held as floors like the others (ADR 0032, third addendum). FRAUD-ID and MISCONDUCT
# were widened on this set too (to 42/46 and 55/55 here), but the blind reading gave them one more false alarm
# each, which their blind floors forbid, so both keep main's rules and main's figures here.
TUNING2_FIGURES = {
    "FRAUD-ID": (35, 46, 42),         # recall 76.1%: below the target (27 of 34 before the fifth addendum)
    "HARASSMENT": (14, 14, 14),
    "URGENCY": (19, 20, 20),
    "MONEY-LOSS": (7, 7, 12),         # precision 58.3%: below the target
    "TIME-LIMIT": (15, 18, 15),       # recall 83.3%
    "MISCONDUCT": (44, 55, 51),       # recall 80.0%, precision 86.3%
    "REPEAT-CONTACT": (59, 60, 63),
    "OLDER-AM": (1, 2, 1),            # recall 50%: below the target
    "SCRA": (4, 4, 4),
}


# The first held-out set (200 narratives of 2016–2019, drawn by a scripted rule and labelled before any
# detector ran on them; analyst/data/signals/heldout/SOURCE.md). Read once untouched: FRAUD-ID 30/47 (30 of 38
# flagged), HARASSMENT 26/31 (26/26), URGENCY 20/31 (20/21), MONEY-LOSS 3/12 (3/5), TIME-LIMIT 8/26 (8/9),
# MISCONDUCT 49/75 (49/56), REPEAT-CONTACT 42/80 (42/45), OLDER-AM 5/10 (5/5), SCRA 3/4 (3/3). Since the second
# held-out set took its place, the rules were widened on its misses (ADR 0032, fifth addendum): tuning figures.
HELDOUT_FIGURES = {
    "FRAUD-ID": (35, 47, 43),         # recall 74.5%: below the target
    "HARASSMENT": (30, 31, 30),
    "URGENCY": (30, 31, 31),
    "MONEY-LOSS": (7, 12, 9),         # recall 58.3%: below the target
    "TIME-LIMIT": (19, 26, 20),       # recall 73.1%: below the target
    "MISCONDUCT": (63, 75, 69),       # recall 84.0%, precision 91.3%
    "REPEAT-CONTACT": (64, 80, 67),   # recall 80.0%, precision 95.5%
    "OLDER-AM": (10, 10, 10),
    "SCRA": (4, 4, 4),
}


# The second held-out set (193 narratives, drawn and labelled before any detector ran on them; analyst/data/
# signals/heldout2/SOURCE.md): the rules alone. Read once untouched (after the fifth addendum): FRAUD-ID 31/45
# (31 of 38 flagged), HARASSMENT 12/20 (12/13), URGENCY 16/21 (16/20), MONEY-LOSS 4/11 (4/5), TIME-LIMIT 3/10
# (3/4), MISCONDUCT 37/54 (37/45), REPEAT-CONTACT 54/85 (54/58), OLDER-AM 1/3 (1/2), SCRA 4/5 (4/5). Since the
# third held-out set took its place, the rules were widened on its misses (ADR 0032, sixth addendum): tuning
# figures now, and no widening added a false alarm on any labelled set (four went).
HELDOUT2_FIGURES = {
    "FRAUD-ID": (40, 45, 47),         # recall 88.9%, precision 85.1%
    "HARASSMENT": (18, 20, 19),       # recall 90.0%
    "URGENCY": (20, 21, 24),          # recall 95.2%, precision 83.3%
    "MONEY-LOSS": (7, 11, 8),         # recall 63.6%
    "TIME-LIMIT": (8, 10, 9),         # recall 80.0%, precision 88.9%
    "MISCONDUCT": (46, 54, 50),       # recall 85.2%, precision 92.0%
    "REPEAT-CONTACT": (68, 85, 72),   # recall 80.0%, precision 94.4%
    "OLDER-AM": (1, 3, 2),            # recall 33.3%, precision 50%
    "SCRA": (4, 5, 5),                # recall 80%, precision 80%
}
# The third held-out set (200 narratives, drawn and labelled before any detector ran on them, never tuned or
# trained on; analyst/data/signals/heldout3/SOURCE.md): the rules alone. Before the sixth addendum's widening
# they read FRAUD-ID 45/63 (45 of 56 flagged), URGENCY 8/10 (8/11), MISCONDUCT 30/46 (30/47), the rest as now.
# The set has no harm-issue row: one harassment, no servicemember, four older consumers (SOURCE.md). The
# offline analyst adds the sentence reader's signals (tests/analyst/test_signal_reader.py holds those figures).
HELDOUT3_FIGURES = {
    "FRAUD-ID": (46, 63, 57),         # recall 73.0%
    "HARASSMENT": (1, 1, 2),          # precision 50%
    "URGENCY": (8, 10, 12),           # recall 80%, precision 66.7%
    "MONEY-LOSS": (3, 10, 4),         # recall 30.0%
    "TIME-LIMIT": (9, 18, 9),         # recall 50.0%, precision 100%
    "MISCONDUCT": (31, 46, 47),       # recall 67.4%, precision 66.0%
    "REPEAT-CONTACT": (32, 49, 35),   # recall 65.3%, precision 91.4%
    "OLDER-AM": (0, 4, 0),            # recall 0%
    "SCRA": (0, 0, 1),                # no servicemember; one false flag
}


def raised(complaint_id: str, rows: dict | None = None) -> set[str]:
    text = (rows or ROWS)[complaint_id]["Consumer complaint narrative"]
    evidence = evidence_of({"evidence": [{"id": 1, "text": text}]})
    return {s.code for s in detect_signals({}, [{"id": e.id, "text": e.text} for e in evidence])}


def figures_on(splits: tuple[str, ...]) -> dict[str, dict]:
    chosen = [cid for cid in ROWS if split_of(cid) in splits]
    pairs = [({code: LABELS[cid][code] for code in DETECTED}, raised(cid)) for cid in chosen]
    return {code: part for code, part in signal_figures(pairs).items() if code in DETECTED}


def assert_target_or_floor(figures: dict[str, dict], expected: dict[str, tuple[int, int, int]]) -> None:
    for code, (found, labelled, flagged) in expected.items():
        part = figures[code]
        assert part["labelled"] == labelled, code  # the labels are fixed: a change here is a relabelling
        assert part["found"] >= found, code
        assert part["flagged"] - part["found"] <= flagged - found, code  # no more false alarms
        if labelled and found / labelled >= SIGNAL_TARGETS["recall"] and (
                not flagged or found / flagged >= SIGNAL_TARGETS["precision"]):
            assert part["meets_target"], code


def test_each_signal_on_the_test_split_meets_the_target_or_holds_its_floor():
    assert_target_or_floor(figures_on(("test",)), TEST_FIGURES)


@pytest.mark.parametrize(("rows", "labels", "complaints", "expected"), [
    (BLIND_ROWS, BLIND, 300, BLIND_FIGURES),
    (TUNING_ROWS, TUNING, 160, TUNING_FIGURES),
    (TUNING2_ROWS, TUNING2, 210, TUNING2_FIGURES),
    (HELDOUT_ROWS, HELDOUT, 200, HELDOUT_FIGURES),
    (HELDOUT2_ROWS, HELDOUT2, 193, HELDOUT2_FIGURES),
    (HELDOUT3_ROWS, HELDOUT3, 200, HELDOUT3_FIGURES),
], ids=["blind", "tuning", "tuning2", "heldout", "heldout2", "heldout3"])
def test_each_signal_on_a_labelled_set_meets_the_target_or_holds_its_floor(rows, labels, complaints, expected):
    pairs = [({code: labels[cid][code] for code in DETECTED}, raised(cid, rows)) for cid in rows]
    figures = {code: part for code, part in signal_figures(pairs).items() if code in DETECTED}
    assert sum(part["complaints"] for part in figures.values()) == complaints * len(DETECTED)
    assert_target_or_floor(figures, expected)


def test_over_every_split_each_signal_keeps_its_figures():
    """All 191 complaints (all tuned on, so these are not held-out figures)."""
    figures = figures_on(("train", "dev", "test"))
    floors = {"FRAUD-ID": (31, 32, 32), "HARASSMENT": (12, 12, 13), "URGENCY": (9, 9, 10), "MONEY-LOSS": (16, 16, 18),
              "TIME-LIMIT": (9, 10, 9), "MISCONDUCT": (58, 58, 59), "REPEAT-CONTACT": (58, 59, 59),
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
    # the consumer disowns the debt: identity theft in the rubric's sense
    ("I did not sign for nor receive proper notification about this debt.", "FRAUD-ID"),
    ("The account was not established by myself.", "FRAUD-ID"),
    ("No one can provide a contract with my signature showing I opened the accounts.", "FRAUD-ID"),
    ("I did not make these inquiries.", "FRAUD-ID"),
    ("I explained to them that these accounts are fraud.", "FRAUD-ID"),
    # the company named as the one committing the fraud
    ("The bank fraudulently charged my card for a plan I never had.", "MISCONDUCT"),
    ("MOHELA failed to provide legally required billing statements.", "MISCONDUCT"),
    ("I have contacted the servicer serveral times.", "REPEAT-CONTACT"),
    ("I was assured multiple times over the phone that it was fixed.", "REPEAT-CONTACT"),
    ("I have had {$46000.00} in interest added to my loans.", "MONEY-LOSS"),
    # word families widened on the tuning set (analyst/data/signals/tuning/), one sentence of it each
    ("I discovered an unknown account on my personal credit report.", "FRAUD-ID"),
    ("I looked at my credit report and noticed inquiries that I did not do.", "FRAUD-ID"),
    ("It is clear that I have no association with them.", "FRAUD-ID"),
    ("I have never had an account with XXXX which they acknowledge.", "FRAUD-ID"),
    ("I have a capital one student credit card and it was lost then used and the person ran my bill up.", "FRAUD-ID"),
    ("The same people then called my husband at his place of work.", "HARASSMENT"),
    ("She claimed that if I didn't pay them {$500.00} that they would press criminal charges and I would go to jail.",
     "HARASSMENT"),
    ("They call me every other day demanding payment as well.", "HARASSMENT"),
    ("I just missed one payment and CITI SEARS has called me from XXXX on XX/XX/19 SUNDAY 4 times SO FAR.",
     "HARASSMENT"),
    ("She told me that I was going to be sued.", "URGENCY"),
    ("Rushmore received file on XX/XX/2019 two weeks before a scheduled auction.", "URGENCY"),
    ("They took the car and sold it in an auction.", "URGENCY"),
    ("It is not authorized to fail to validate these accounts without any proof within the period allowed by law.",
     "TIME-LIMIT"),
    ("Per FCRA 605B CREDIT BUREAUS are required to remove any items not later than 4 business days after the receipt.",
     "TIME-LIMIT"),
    ("XXXX stated the documents were received but ( 14 ) days were required to postpone the Foreclosure Sale.",
     "TIME-LIMIT"),
    ("Under 15 US code 1681e ( b ) these accounts are in violation of not reporting 100 % accurate.", "MISCONDUCT"),
    ("This institution has already been found guilty of these kind of practices and have paid fines.", "MISCONDUCT"),
    ("This was nothing but an extortion.", "MISCONDUCT"),
    ("I was told they can not do that and its against the FCRA.", "MISCONDUCT"),
    ("This is my 17th endeavor to tell you that I am a victim of identity theft.", "REPEAT-CONTACT"),
    ("After several cycles of correspondence, I learned from research that I could settle.", "REPEAT-CONTACT"),
    ("I have talked to them several times.", "REPEAT-CONTACT"),
    ("They failed to answer direct questions -- on Friday, Monday, Tuesday, and Wednesday.", "REPEAT-CONTACT"),
    ("Someone gained access to my banking information and spent {$2200.00} from various checking accounts.",
     "MONEY-LOSS"),
    ("They were profiling retired senior citizens.", "OLDER-AM"),
    # word families widened on the second tuning set (analyst/data/signals/tuning2/), from its sentences
    ('They are calling 4-6 times a day from numerous phone numbers.', 'HARASSMENT'),
    ('I am getting at least a half dozen phone calls a day from them.', 'HARASSMENT'),
    ('My complaint is about Capital One, due to theirs abusive collections activities.', 'HARASSMENT'),
    ('I received a phone call from a XXXX number at my place of employment.', 'HARASSMENT'),
    ('My family memebers have each received several calls from this company.', 'HARASSMENT'),
    ('Now I got served a civil action summons on XX/XX/XXXX with 20 days to respond.', 'URGENCY'),
    ('He left a message that the state had hired him to serve process.', 'URGENCY'),
    ('LVNV funding went ahead and took legal action before properly validating the debt.', 'URGENCY'),
    ('She said that there would be a lawsuit filed against me.', 'URGENCY'),
    ('They took me to local court and I proved that they illegally took the money.', 'URGENCY'),
    ('I had no choice than to pay the losses to avoid losing my primary residence.', 'URGENCY'),
    ('They are still threatening legal action.', 'URGENCY'),
    ("ShellpointMortgageforeclosureattorneyforeclosedonmyhomeXX/XX/2019whileI'mmakingmypayment.", 'URGENCY'),
    ('I was paying homeowners insurance and property '
     'taxes twice which ripped me off for over {$6000.00}.', 'MONEY-LOSS'),
    ('My account was wiped of {$4600.00} in about 22 minutes.', 'MONEY-LOSS'),
    ('My credit card was charges 11 times for a total amount of {$8800.00} from a merchant.', 'MONEY-LOSS'),
    ('The flight and hotels were to be paid from the {$1900.00}, they obviously embezzled those funds.', 'MONEY-LOSS'),
    ('They were supposed to respond in 30 days, and its been nearly 4 months now.', 'TIME-LIMIT'),
    ('By the fair credit act they were supposed to be deleted if not verified in 30 days.', 'TIME-LIMIT'),
    ('Several of these accounts have exceed their legal reporting periods of seven years.', 'TIME-LIMIT'),
    ('The first delinquent date is greater than 7 years and it is paid in full.', 'TIME-LIMIT'),
    ('I am wanting this to be removed due to the age.', 'TIME-LIMIT'),
    ('Debt collectors are required to contact me first and '
     'allow me 30 days to submit a written request for validation.', 'TIME-LIMIT'),
    ('I was given no evidence of my obligation to pay '
     'these debts in the time given by FCRA requirements.', 'TIME-LIMIT'),
    ('It is your policy to keep reporting a bankruptcy '
     'that is filed, dismissed, or adjudicated for 10 years.', 'TIME-LIMIT'),
    ('Been called at least 5-6 times for the past 2-3 weeks.', 'REPEAT-CONTACT'),
    ('I answered one of their calls after they kept trying repeatedly.', 'REPEAT-CONTACT'),
    ('I have told them several times to remove the phone number.', 'REPEAT-CONTACT'),
    ('I have received several rude phone calls demanding payment.', 'REPEAT-CONTACT'),
    ("I've also sent follow-up letters that have also been ignored.", 'REPEAT-CONTACT'),
    ('I have tried and tried to get Experian to fix this issue.', 'REPEAT-CONTACT'),
    ('After numerous contacts with Experian the account is still there.', 'REPEAT-CONTACT'),
    ('My broker and a lawyer contacted her via phone, mail, and email.', 'REPEAT-CONTACT'),
    ('I talked with three people at Barclays, and an online chat.', 'REPEAT-CONTACT'),
    ('I continued to ask for the late fee to be reversed.', 'REPEAT-CONTACT'),
    ('I have contacted MoneyLion Inc. multiple times to resolve this matter.', 'REPEAT-CONTACT'),
    ('Ive reach out to them numerous times and still no action has taken place.', 'REPEAT-CONTACT'),
    ('I have repeatedly stated I do not know this person.', 'REPEAT-CONTACT'),
    ('I got home yesterday to a total of 21 call from the number.', 'REPEAT-CONTACT'),
    ('I used part of my G.I. Bill for these programs along with student loans.', 'SCRA'),
    ('I live off of my ssd check and pay my rent with it.', 'OLDER-AM'),
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
    # the company committing the fraud is misconduct, not identity theft
    ("The bank fraudulently charged my card for a plan I never had.", "FRAUD-ID"),
    ("They defrauded me out of my deposit with fraudulent charges.", "FRAUD-ID"),
    # a debt the consumer co-signed is theirs to dispute, not an identity theft
    ("I never signed any cosigner agreement in writing.", "FRAUD-ID"),
    # a hedge, or a report that misstates the history, is not an accusation of deception
    ("Her statements may be misleading or inaccurate.", "MISCONDUCT"),
    ("The monthly reporting misrepresents my payment history.", "MISCONDUCT"),
    # a second call is not repeated contact; how long the consumer waited is not a legal window
    ("I called again that same day ( second call ) and was walked through my options.", "REPEAT-CONTACT"),
    ("It has been over 45 days since I first contacted them and nothing has been resolved.", "TIME-LIMIT"),
    # what the widened families must still leave out (tuning set)
    ("Remove this personal information that does not belong to me.", "FRAUD-ID"),
    ("This address is not mine and never has been.", "FRAUD-ID"),
    ("Claiming a letter about fraud won't help me because this wasn't a fraudulent charge.", "FRAUD-ID"),
    ("XXXX called Trident 15 times today and couldn't get through.", "HARASSMENT"),
    ("I made hundreds of phone calls, emails and texts begging them to honor what was agreed upon.", "HARASSMENT"),
    ("I am requesting that you remove the extended fraud alert from my credit report.", "MISCONDUCT"),
    ("MasterCard is providing funds for the invasion of illegal immigrants into our country.", "MISCONDUCT"),
    ("I have sent 2 letters Certified Mail and these issues are still incorrect.", "REPEAT-CONTACT"),
    ("This is my 2nd attempt with the three bureaus.", "REPEAT-CONTACT"),
    ("There have been so many complaints online regarding naca.", "REPEAT-CONTACT"),
    ("This request required Nelnet to respond within 14 days with full financial records.", "TIME-LIMIT"),
    ("I was taking care of my elderly mom and got my two credit cards maxed out.", "OLDER-AM"),
    # an amount far from the words of loss is not the sum lost
    ("We didn't even request reimbursement from the escrow for the {$450.00} flood insurance after Harvey we "
     "already paid for -- then without PMI too, the escrow amount should be around {$700.00} per month not close to "
     "{$1000.00} as it is now ( taxes of about {$8300.00} ).", "MONEY-LOSS"),
    # what the families widened on the second tuning set must still leave out
    ('And my town stated that they will put a yellow sticker on?', 'HARASSMENT'),
    ('I have called 5 times today and I have been cut off 5 times.', 'HARASSMENT'),
    ('This notice has the same effect in this summons or complaint.', 'URGENCY'),
    ("I will pursue legal action if this isn't fixed.", 'URGENCY'),
    ('I will be seeking a minimum of {$5000.00} in damages for defamation.', 'MONEY-LOSS'),
    ('I also cancelled the warranty of {$2800.00} and '
     'was refunded this amount by XXXX back to Santander.', 'MONEY-LOSS'),
    ('My accountant has twice submitted the tax returns; the original tax due was {$9500.00}.', 'MONEY-LOSS'),
    ('Failure to respond within 30 days of receipt of '
     'this certified letter will result in legal action.', 'TIME-LIMIT'),
    ('MoneyLion Inc. has reported late payments of more than 30 days to the three major credit bureaus.', 'TIME-LIMIT'),
    ('So I am calling upon you again for your assistance.', 'REPEAT-CONTACT'),
    ('I reached out again today to make this request via phone.', 'REPEAT-CONTACT'),
    ('Navy Federal keeps reporting a negative account on my credit.', 'SCRA'),
])
def test_what_the_rubric_excludes_is_not_flagged(text, code):
    assert code not in signals_of(text)


def test_a_narrative_written_without_spaces_is_quoted_around_what_was_found():
    text = "Iwasapprovedfortrialmodification" * 12 + "theforeclosureattorneyforeclosedonmyhome" + "andnoonecalled" * 30
    urgency = next(s for s in detect_signals({}, [{"id": 1, "text": text}]) if s.code == "URGENCY")
    assert urgency.quote in text and "foreclos" in urgency.quote and len(urgency.quote) <= 300
