"""Transparent risk rules of the offline analyst.

Each rule reads the case record or one evidence item and yields a RiskSignal citing where it
came from (the evidence id, or None for a fact of the case record such as a tag). The level is
then computed from the scoring table below — no learned weights, so an analyst can check every
step by hand.

Scoring table
=============

| signal          | trigger                                                                     | points | floor  |
|-----------------|-----------------------------------------------------------------------------|--------|--------|
| FRAUD-ID        | identity theft / fraud language ("identity theft", "not my account", ...)   | 3      | high   |
| URGENCY         | foreclosure, eviction, garnishment, repossession, lawsuit, offset, deadline | 2      | —      |
| MONEY-LOSS      | a stated amount above $1,000 ({$1100.00}, $1,250, $2k)                      | 2      | —      |
| REPEAT-CONTACT  | "called 5 times", "multiple times", "called them again", or ≥ 4 dates      | 1      | —      |
| OLDER-AM        | case tag "Older American"                                                   | 1      | medium |
| SCRA            | case tag "Servicemember" (or servicemember / veteran / military language)   | 1      | medium |

Each code counts once per case however often it is found (its strongest evidence is cited).

| total points | level    |
|--------------|----------|
| 0–1          | low      |
| 2–3          | medium   |
| 4–5          | high     |
| 6 or more    | critical |

The level is then raised to the highest floor of the signals present. Steps are two points wide,
so MONEY-LOSS raises the level by one step, as rule MONEY-LOSS in cases/policy.py says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from runs.offline.text import date_mentions, money_amounts, shorten, split_sentences

LEVELS = ("low", "medium", "high", "critical")

POINTS = {"FRAUD-ID": 3, "URGENCY": 2, "MONEY-LOSS": 2, "REPEAT-CONTACT": 1, "OLDER-AM": 1, "SCRA": 1}
FLOORS = {"FRAUD-ID": "high", "OLDER-AM": "medium", "SCRA": "medium"}
LEVEL_BY_POINTS = ((6, "critical"), (4, "high"), (2, "medium"), (0, "low"))
MONEY_LOSS_THRESHOLD = Decimal("1000")
REPEATED_DATES = 4

_FRAUD = re.compile(
    r"\bidentity theft\b|\bstolen identity\b|\bidentity (?:was|has been) stolen\b|\bstole my identity\b"
    r"|\bfraud(?:ulent|ulently|ster|sters)?\b|\bscam(?:med|mer|mers)?\b"
    r"|\bnot my (?:account|debt|loan)s?\b|\b(?:is|are|was|were)(?: not|n't) (?:even )?mine\b"
    r"|\bnever (?:opened|applied for|authori[sz]ed|signed)\b"
    r"|\bunauthori[sz]ed (?:charge|charges|account|accounts|inquiry|inquiries|withdrawal|withdrawals|transaction|transactions)\b",
    re.IGNORECASE,
)
_URGENCY = re.compile(
    r"\bforeclos\w*|\bevict\w*|\bgarnish\w*|\brepossess\w*|\bsheriff(?:'s)? sale\b|\blawsuit\b|\bsued\b"
    r"|\bdefault judg(?:e)?ment\b|\bbank levy\b|\blevied\b|\btreasury offset\b|\b(?:tax refund|social security)\b[^.]{0,40}\b(?:seized|offset|taken|withheld)\b"
    r"|\bdeadline\b|\bwithin \d+ days\b|\bfinal notice\b|\bshut[- ]?off\b|\blose (?:my|our) (?:home|house|car)\b",
    re.IGNORECASE,
)
_WORD_NUMBERS = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                 "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "dozen": 12, "dozens": 24}
_REPEAT_COUNT = re.compile(
    r"\b(?:called|contacted|phoned|emailed|spoke(?: to| with)?|reached out to|wrote to|disputed)\b[^.!?]{0,40}?"
    r"\b(?P<count>\d+|XXXX|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|a dozen|dozens of)"
    r"\s+(?:\w+\s+)?times\b", re.IGNORECASE)
_REPEAT_PHRASE = re.compile(
    r"\b(?:multiple|several|numerous|countless|many|so many|repeated) (?:times|calls|attempts|occasions|phone calls|letters|disputes)\b"
    r"|\bagain and again\b|\bover and over\b|\brepeatedly\b|\btime after time\b"
    r"|\bevery time (?:i|we) (?:have )?(?:call|called|contact|contacted|spoke|speak)\b"
    r"|\b(?:call|called|calling|contacted|wrote) (?:them |back |the \w+ )?(?:yet )?again\b",
    re.IGNORECASE)
_SERVICEMEMBER = re.compile(r"\b(?:servicemember|service member|active duty|veteran|military|deployed|deployment)\b",
                            re.IGNORECASE)


@dataclass(frozen=True)
class Signal:
    code: str
    description: str
    evidence_id: int | None

    def as_dict(self) -> dict:
        return {"code": self.code, "description": self.description, "evidence_id": self.evidence_id}


def case_tags(case: dict) -> set[str]:
    tags = case.get("tags") or ""
    if isinstance(tags, str):
        tags = re.split(r"[,;]", tags)
    return {str(tag).strip().lower() for tag in tags if str(tag).strip() and str(tag).strip().lower() != "none"}


def _quote(sentence: str) -> str:
    return "“" + shorten(sentence, 160) + "”"


def _evidence_signals(evidence_id: int | None, text: str) -> list[Signal]:
    found: dict[str, Signal] = {}
    largest: tuple[Decimal, str] | None = None
    repeat_count: tuple[int, str] | None = None
    for sentence in split_sentences(text):
        if "FRAUD-ID" not in found and (match := _FRAUD.search(sentence)):
            found["FRAUD-ID"] = Signal("FRAUD-ID", f"Fraud / identity-theft language ({match.group(0).lower()}): "
                                                   f"{_quote(sentence)}", evidence_id)
        if "URGENCY" not in found and (match := _URGENCY.search(sentence)):
            found["URGENCY"] = Signal("URGENCY", f"Time-critical harm ({match.group(0).lower()}): {_quote(sentence)}",
                                      evidence_id)
        for amount in money_amounts(sentence):
            if largest is None or amount > largest[0]:
                largest = (amount, sentence)
        if (match := _REPEAT_COUNT.search(sentence)):
            raw = match.group("count").lower()
            count = int(raw) if raw.isdigit() else _WORD_NUMBERS.get(raw.replace("a ", "").replace(" of", ""), 3)
            if count >= 3 and (repeat_count is None or count > repeat_count[0]):
                repeat_count = (count, sentence)
        elif repeat_count is None and (match := _REPEAT_PHRASE.search(sentence)):
            repeat_count = (0, sentence)
        if "SCRA" not in found and _SERVICEMEMBER.search(sentence):
            found["SCRA"] = Signal("SCRA", f"Servicemember / veteran mentioned: {_quote(sentence)}", evidence_id)
    if largest is not None and largest[0] > MONEY_LOSS_THRESHOLD:
        found["MONEY-LOSS"] = Signal("MONEY-LOSS", f"Stated amount ${largest[0]:,.2f} exceeds $1,000: "
                                                   f"{_quote(largest[1])}", evidence_id)
    if repeat_count is not None:
        found["REPEAT-CONTACT"] = Signal("REPEAT-CONTACT", f"Repeated contact: {_quote(repeat_count[1])}", evidence_id)
    else:
        dates = sorted(set(date_mentions(text)))
        if len(date_mentions(text)) >= REPEATED_DATES:
            found["REPEAT-CONTACT"] = Signal(
                "REPEAT-CONTACT", f"{len(date_mentions(text))} date mentions in one account of the complaint "
                                  f"({', '.join(dates[:3])}), a drawn-out dispute", evidence_id)
    return list(found.values())


def detect_signals(case: dict, evidence: list[dict]) -> list[Signal]:
    """Signals of a case, one per code, in a fixed order. `evidence` items: {"id", "text"}."""
    by_code: dict[str, Signal] = {}
    tags = case_tags(case)
    if "older american" in tags:
        by_code["OLDER-AM"] = Signal("OLDER-AM", "Case tagged Older American (case record).", None)
    if "servicemember" in tags:
        by_code["SCRA"] = Signal("SCRA", "Case tagged Servicemember (case record).", None)
    for item in evidence:
        for signal in _evidence_signals(item.get("id"), item.get("text") or ""):
            # The first evidence item that shows a code is cited (tags on the record win).
            by_code.setdefault(signal.code, signal)
    return [by_code[code] for code in POINTS if code in by_code]


def raise_to(level: str, floor: str) -> str:
    return LEVELS[max(LEVELS.index(level), LEVELS.index(floor))]


def score(signals: list[Signal]) -> tuple[str, int, str]:
    """(risk level, points, how it was computed) from the scoring table."""
    codes = [signal.code for signal in signals]
    points = sum(POINTS.get(code, 0) for code in codes)
    level = next(name for threshold, name in LEVEL_BY_POINTS if points >= threshold)
    steps = [f"{code} +{POINTS.get(code, 0)}" for code in codes]
    explanation = f"{' + '.join(steps) if steps else 'no signals'} = {points} point(s) → {level}"
    for code in codes:
        floor = FLOORS.get(code)
        if floor and LEVELS.index(floor) > LEVELS.index(level):
            level = floor
            explanation += f"; {code} requires at least {floor} → {level}"
    return level, points, explanation
