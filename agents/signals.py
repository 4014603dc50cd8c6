"""Transparent risk rules of the offline analyst.

Each rule reads the case record or one evidence item and yields a Signal citing where it came
from: the evidence id and the exact words (a quote that occurs in that evidence's text), or None
for a fact of the case record such as a tag. The level is then computed from the scoring table
below — no learned weights, so a supervisor can check every step by hand.

Scoring table
=============

| signal          | trigger (one sentence of the evidence)                                       | points | floor  |
|-----------------|------------------------------------------------------------------------------|--------|--------|
| FRAUD-ID        | identity theft: accounts/inquiries opened or used by someone else, or        | 3      | high   |
|                 | disowned ("never signed", "not mine"); not when the company is named as the   |        |        |
|                 | one committing the fraud (that is MISCONDUCT)                                |        |        |
| HARASSMENT      | collection calls described as frequent, "harass", abusive language, threats  | 2      | medium |
|                 | of arrest or of calling the employer (a threat of a lawful step: URGENCY)    |        |        |
| URGENCY         | foreclosure, eviction, garnishment, repossession, a lawsuit against the      | 2      | —      |
|                 | consumer, offset                                                             |        |        |
| MONEY-LOSS      | an amount above $1,000 lost, charged, overpaid or asked back (not a balance, | 2      | —      |
|                 | a grant, or a sum that only would be owed)                                   |        |        |
| TIME-LIMIT      | a legal window (30/45 days to investigate, statute of limitations,           | 1      | —      |
|                 | time-barred debt, items older than seven years, a settlement deadline)       |        |        |
| MISCONDUCT      | the company itself accused of fraud, deception, misleading, or breaking a    | 1      | —      |
|                 | named law; "fraud" alone does not count where the narrative reports identity |        |        |
|                 | theft (it is the thief's)                                                    |        |        |
| REPEAT-CONTACT  | contacts described as repeated ("called 5 times", "several letters",         | 1      | —      |
|                 | "repeated attempts", "once again", three dated contacts)                     |        |        |
| OLDER-AM        | tag "Older American", or age 62+, retirement, Social Security income          | 1      | medium |
| SCRA            | tag "Servicemember", or active duty, veteran, military service, SCRA         | 1      | medium |

Each code counts once per case however often it is found (its first evidence is cited; tags on
the case record win over the narrative).

| total points | level    |
|--------------|----------|
| 0–1          | low      |
| 2–3          | medium   |
| 4–5          | high     |
| 6 or more    | critical |

The patterns each rule reads a sentence with are in agents/signal_patterns.py. The rules are
measured against hand labels of the CFPB sample and six further sets (analyst/data/signals: RUBRIC.md
says what each signal means; `manage.py evaluate` reports recall and precision per signal).

The level is then raised to the highest floor of the signals present. Steps are two points wide,
so MONEY-LOSS raises the level by one step, as rule MONEY-LOSS in cases/policy.py says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from agents.signal_patterns import (
    BREACH_OF_LAW,
    COMPANY_FRAUD,
    HARASSMENT,
    IDENTITY_THEFT,
    LATE_BY,
    LAW_NAMED,
    LOSS_CONTEXT,
    LOSS_WINDOW,
    MISCONDUCT,
    MISCONDUCT_FRAUD,
    NOT_A_LOSS,
    NOT_A_WINDOW,
    NOT_IDENTITY_THEFT,
    NOT_MISCONDUCT,
    OLDER,
    ONLY_TWICE,
    REPEAT_COUNT,
    REPEAT_PHRASE,
    SERVICEMEMBER,
    TIME_LIMIT,
    URGENCY,
    WORD_NUMBERS,
)
from agents.text import money_amounts, split_sentences

LEVELS = ("low", "medium", "high", "critical")

POINTS = {"FRAUD-ID": 3, "HARASSMENT": 2, "URGENCY": 2, "MONEY-LOSS": 2, "TIME-LIMIT": 1, "MISCONDUCT": 1,
          "REPEAT-CONTACT": 1, "OLDER-AM": 1, "SCRA": 1}
FLOORS = {"FRAUD-ID": "high", "HARASSMENT": "medium", "OLDER-AM": "medium", "SCRA": "medium"}
LEVEL_BY_POINTS = ((6, "critical"), (4, "high"), (2, "medium"), (0, "low"))
MONEY_LOSS_THRESHOLD = Decimal("1000")
MAX_QUOTE = 300
OLDER_AGE = 62



@dataclass(frozen=True)
class Signal:
    code: str
    description: str
    evidence_id: int | None
    quote: str = ""

    @property
    def points(self) -> int:
        return POINTS.get(self.code, 0)

    def as_dict(self) -> dict:
        return {"code": self.code, "description": self.description, "evidence_id": self.evidence_id,
                "quote": self.quote, "points": self.points}


def case_tags(case: dict) -> set[str]:
    tags = case.get("tags") or ""
    if isinstance(tags, str):
        tags = re.split(r"[,;]", tags)
    return {str(tag).strip().lower() for tag in tags if str(tag).strip() and str(tag).strip().lower() != "none"}


# A letter's opening ("Dear Consumer Financial Protection Bureau,", "To whom it may concern:") is
# left out of a quotation when the sentence goes on after it: the quote is about the complaint.
_SALUTATION = re.compile(r"^(?:dear\b[^,:]{0,80}|to whom it may concern|hello|hi)\s*[,:]\s*(?=\S)", re.IGNORECASE)
_INNER_SALUTATION = re.compile(r"(?<=\S)\s+Dear (?:Mr|Mrs|Ms|Miss|Dr|Sir|Madam|Sirs|XXXX|[A-Z][a-z]+)\b[^,:.]{0,60}"
                               r"\.?[^,:]{0,40}[,:]\s*(?=\S)")
# A window cut out of a long sentence does not end on a dangling word or a comma ("…, and”).
_DANGLING_END = re.compile(r"(?:[\s,;:(\-]|\b(?:and|or|but|nor|so|to|of|the|a|an|that|which|who|with|in|on|"
                           r"for|by|from|as|at|because|while|if|my|their|his|her|its|our|your)\b)+$", re.IGNORECASE)


# Sentences typed without a space after their full stop ("…not gotten a response.My name is …") reach
# the detectors as one: a word of two lower-case letters or more, a full stop, a capitalised word.
_GLUED = re.compile(r"(?<=[a-z]{2}[.!?])(?=[A-Z][a-z])")
_SHORTEST_PART = 25


def _glued_part(sentence: str, centre: int) -> tuple[str, int]:
    """The glued-on sentence that holds `centre` (and `centre` within it), so a quote shows the words
    of the match and not its neighbours'; the whole sentence when that part would be shorter than a
    phrase."""
    starts = [0, *(m.start() for m in _GLUED.finditer(sentence)), len(sentence)]
    for start, end in zip(starts, starts[1:], strict=False):
        if start <= centre < end:
            part = sentence[start:end].strip()
            return (part, centre - start) if len(part) >= _SHORTEST_PART else (sentence, centre)
    return sentence, centre


def quote_of(sentence: str, match: re.Match | None = None) -> str:
    """Exact words of the sentence (a substring, never edited): the whole sentence when short,
    else a window of whole words around the match that ends on a word that closes a phrase; a
    salutation opening the sentence is left out, and so are sentences glued on without a space
    (around a match)."""
    centre = match.start() if match is not None else 0
    opening = _SALUTATION.match(sentence)
    if opening and (match is None or centre >= opening.end()):
        sentence, centre = sentence[opening.end():], max(0, centre - opening.end())
    # A letter pasted whole: its heading ("To : … Re : …") and its salutation ("Dear Mr. XXXX :") run into
    # one sentence. Only the side of the salutation that holds the match is quoted.
    inner = _INNER_SALUTATION.search(sentence)
    if inner:
        if centre >= inner.end():
            sentence, centre = sentence[inner.end():], centre - inner.end()
        elif centre < inner.start():
            sentence = sentence[:inner.start()].rstrip()
    if match is not None:
        sentence, centre = _glued_part(sentence, centre)
    if len(sentence) <= MAX_QUOTE:
        return sentence
    start = max(0, centre - MAX_QUOTE // 3)
    word_start = start
    while word_start > 0 and not sentence[word_start - 1].isspace():
        word_start -= 1
    if word_start > centre - MAX_QUOTE // 2:  # else no space near: a text written without spaces is cut as it is
        start = word_start
    end = min(len(sentence), start + MAX_QUOTE)
    word_end = end
    while start < word_end < len(sentence) and not sentence[word_end].isspace():
        word_end -= 1
    end = word_end if word_end > start else end
    window = sentence[start:end].strip()
    if end < len(sentence):
        trimmed = _DANGLING_END.sub("", window)
        window = trimmed if len(trimmed) >= MAX_QUOTE // 2 else window
    return window


def _quoted(quote: str) -> str:
    return "“" + quote + "”"


def _identity_theft(sentence: str) -> re.Match | None:
    if COMPANY_FRAUD.search(sentence):
        return None
    match = IDENTITY_THEFT.search(sentence)
    if match and NOT_IDENTITY_THEFT.search(sentence):
        return None
    if match and match.group(0).lower() in ("hacked", "breached") \
            and not re.search(r"\b(?:my|our) (?:identity|account|credit)\b", sentence, re.IGNORECASE):
        return None
    return match


def _law_breached(sentence: str) -> re.Match | None:
    return BREACH_OF_LAW.search(sentence) if LAW_NAMED.search(sentence) else None


def _older_american(sentence: str) -> re.Match | None:
    for match in OLDER.finditer(sentence):
        age = match.group("age") or match.group("age2") or match.group("age3")
        if age is None or int(age) >= OLDER_AGE:
            return match
    return None


def _repeat_contact(sentence: str) -> tuple[int, re.Match] | None:
    if (match := REPEAT_COUNT.search(sentence)):
        raw = match.group("count").lower()
        count = int(raw) if raw.isdigit() else WORD_NUMBERS.get(raw.replace("a ", "").replace(" of", ""), 3)
        if count >= 3:
            return count, match
    if (match := REPEAT_PHRASE.search(sentence)) and not ONLY_TWICE.search(sentence):
        return 0, match
    return None


def _money_loss(sentence: str) -> tuple[Decimal, re.Match] | None:
    if NOT_A_LOSS.search(sentence):
        return None
    best: tuple[Decimal, re.Match] | None = None
    for context in LOSS_CONTEXT.finditer(sentence):
        near = sentence[max(0, context.start() - LOSS_WINDOW):context.end() + LOSS_WINDOW]
        amounts = [amount for amount in money_amounts(near) if amount > MONEY_LOSS_THRESHOLD]
        if amounts and (best is None or max(amounts) > best[0]):
            best = (max(amounts), context)
    return best


def _evidence_signals(evidence_id: int | None, text: str) -> list[Signal]:
    found: dict[str, Signal] = {}
    largest: tuple[Decimal, str, str] | None = None
    repeat: tuple[int, str] | None = None

    def add(code: str, what: str, sentence: str, match: re.Match | None) -> None:
        if code not in found:
            quote = quote_of(sentence, match)
            found[code] = Signal(code, f"{what}: {_quoted(quote)}", evidence_id, quote)

    fraud_words: tuple[str, re.Match] | None = None
    for sentence in split_sentences(text):
        if (theft := _identity_theft(sentence)):
            add("FRAUD-ID", f"Identity theft ({theft.group(0).lower()})", sentence, theft)
        if (match := COMPANY_FRAUD.search(sentence) or MISCONDUCT.search(sentence) or _law_breached(sentence)) \
                and not NOT_MISCONDUCT.search(sentence):
            add("MISCONDUCT", f"The company is accused of misconduct ({match.group(0).lower()})", sentence, match)
        elif not theft and fraud_words is None and (match := MISCONDUCT_FRAUD.search(sentence)):
            fraud_words = (sentence, match)
        if (match := HARASSMENT.search(sentence)):
            add("HARASSMENT", f"Harassment ({match.group(0).lower()})", sentence, match)
        if (match := URGENCY.search(sentence)):
            add("URGENCY", f"Time-critical harm ({match.group(0).lower()})", sentence, match)
        if (match := TIME_LIMIT.search(sentence)) and not NOT_A_WINDOW.search(sentence[match.start():]) \
                and not LATE_BY.search(sentence):
            add("TIME-LIMIT", f"Time limit ({match.group(0).lower()})", sentence, match)
        if (match := SERVICEMEMBER.search(sentence)):
            add("SCRA", f"Servicemember or veteran ({match.group(0).lower()}) in the narrative", sentence, match)
        if (match := _older_american(sentence)):
            add("OLDER-AM", f"Older consumer ({match.group(0).lower()}) in the narrative", sentence, match)
        if (loss := _money_loss(sentence)) and (largest is None or loss[0] > largest[0]):
            largest = (loss[0], sentence, quote_of(sentence, loss[1]))
        if (contact := _repeat_contact(sentence)) and (repeat is None or contact[0] > repeat[0]):
            repeat = (contact[0], sentence, contact[1])
    if fraud_words is not None and "FRAUD-ID" not in found:
        add("MISCONDUCT", f"The company is accused of misconduct ({fraud_words[1].group(0).lower()})", *fraud_words)
    if largest is not None:
        amount, _, quote = largest
        found["MONEY-LOSS"] = Signal("MONEY-LOSS", f"${amount:,.2f} lost, charged or asked back (above $1,000): "
                                                   f"{_quoted(quote)}", evidence_id, quote)
    if repeat is not None:
        count, sentence, match = repeat
        quote = quote_of(sentence, match)
        what = f"Repeated contact ({count} times)" if count else "Repeated contact"
        found["REPEAT-CONTACT"] = Signal("REPEAT-CONTACT", f"{what}: {_quoted(quote)}", evidence_id, quote)
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
