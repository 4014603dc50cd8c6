"""Guards the case-analysis graph applies to every provider's output, the offline analyst and a
real model alike: nothing here trusts what a model wrote.

- Evidence is data: sentences of the evidence that address the reviewer, the agents or the system
  (approvals, instructions, role claims) are found once per case; an agent's text that reads as
  an instruction or repeats such a sentence loses that sentence before anyone reads it.
- Policy floors: a risk level below the floor of a signal the evidence or the case record shows
  (identity theft: high; servicemember, older American, harassment: medium) is raised to it.
- Rationales a person reads first: one paragraph in sentences, without codes or ids (each known
  code is spelled out), and the detail below it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents.citations import code_with_words, evidence_quote, signal_words, signals_in_words, spell_out_codes
from agents.signals import FLOORS, LEVELS, POINTS, detect_signals, raise_to
from agents.text import (
    clean_narrative,
    date_mentions,
    is_instruction,
    set_aside_instructions,
    shorten,
    without_instructions,
)
from cases.notice_checker import find_dates, request_statement, unrecorded_claims

ADDRESSED_TO_REVIEWER = "The evidence contains text addressed to the reviewer"
FIRST_PARAGRAPH_CHARS = 1200


@dataclass
class CaseText:
    """The case's evidence as the guards read it: the texts with instruction-like sentences set
    aside, and those sentences by evidence id (None: the case title)."""
    texts: dict[int, str] = field(default_factory=dict)
    set_aside: dict[int | None, list[str]] = field(default_factory=dict)

    @property
    def set_aside_sentences(self) -> list[str]:
        return [sentence for sentences in self.set_aside.values() for sentence in sentences]


def case_text(case) -> CaseText:
    read = CaseText()
    _, title_dropped = set_aside_instructions(str(getattr(case, "title", "") or ""))
    if title_dropped:
        read.set_aside[None] = title_dropped
    for evidence in case.evidence.all()[:50]:
        kept, dropped = set_aside_instructions(clean_narrative(evidence.read_text()))
        read.texts[evidence.pk] = kept
        if dropped:
            read.set_aside[evidence.pk] = dropped
    return read


def scrub(text: str, read: CaseText) -> tuple[str, list[str]]:
    """An agent's own words without instruction-like sentences or echoes of set-aside evidence."""
    return without_instructions(text or "", read.set_aside_sentences)


def floor_for(case, read: CaseText, model_signals: list[dict]) -> tuple[str, list[str]]:
    """(the minimum risk level the signals oblige, the codes that oblige it). The signals are those
    the model named and those the scoring rules find in the evidence and the case record — a
    model that leaves identity theft out does not lower the floor."""
    record = {"tags": str(getattr(case, "tags", "") or "")}
    found = detect_signals(record, [{"id": pk, "text": text} for pk, text in read.texts.items()])
    codes = {str(s.get("code")) for s in model_signals if isinstance(s, dict)} | {s.code for s in found}
    minimum = "low"
    for code in sorted(codes & set(FLOORS)):
        if LEVELS.index(FLOORS[code]) > LEVELS.index(minimum):
            minimum = FLOORS[code]
    because = sorted(code for code in codes & set(FLOORS) if FLOORS[code] == minimum and minimum != "low")
    return minimum, because


def raised(level: str, minimum: str) -> str:
    return raise_to(level if level in LEVELS else "low", minimum)


def floored_risk(case, read: CaseText, level: str, signals: list[dict]) -> tuple[str, str]:
    """(the level at least the policy floor of the signals, "" or the sentence saying it was
    raised): the same floor the adjudication gets, applied to the risk assessor's own answer."""
    minimum, because = floor_for(case, read, signals)
    floored = raised(level, minimum)
    if floored == level:
        return level, ""
    words = " and ".join(code_with_words(c).split(" (", 1)[-1].rstrip(")") for c in because)
    return floored, f"Raised from {level} to {floored}: policy sets a minimum of {floored} risk for {words}."


def catalogued(signals: list[dict]) -> tuple[list[dict], list[str]]:
    """(the signals whose code is one of the scoring rules', the codes that are not): a model
    can name a code no rule knows, which would otherwise read as a reason."""
    kept = [s for s in signals if str(s.get("code")) in POINTS]
    return kept, sorted({str(s.get("code")) for s in signals} - set(POINTS))


def first_paragraph(text: str) -> tuple[str, str]:
    """(the first paragraph on one line, the rest)."""
    text = (text or "").strip()
    head, _, rest = text.partition("\n")
    return " ".join(head.split()), rest.strip()


def readable(first: str, details: list[str]) -> str:
    """A rationale: the first paragraph in words (codes spelled out, no line breaks), then a
    "Details" paragraph holding what is left."""
    first = shorten(spell_out_codes(" ".join((first or "").split())), FIRST_PARAGRAPH_CHARS)
    rest = "\n".join(d.strip() for d in details if d and d.strip())
    if rest and not rest.startswith("Details"):
        rest = "Details: " + rest
    return f"{first}\n\n{rest}" if rest else first


def risk_first_paragraph(level: str, signals: list[dict], floor_codes: list[str]) -> str:
    """"Risk high because of: identity theft (...). The evidence says: “…”" from the signals
    (their quotes verified by the graph)."""
    words = list(dict.fromkeys(w for w in (signal_words(s) for s in signals if isinstance(s, dict)) if w))
    quote = evidence_quote(signals)
    if words:
        first = f"Risk {level} because of: {signals_in_words(words)}."
    else:
        first = f"Risk {level}: no risk signal was found in the evidence."
    if floor_codes:
        first += (f" Policy sets a minimum of {level} risk for "
                  f"{' and '.join(code_with_words(c).split(' (', 1)[-1].rstrip(')') for c in floor_codes)}.")
    if quote:
        first += f" {quote}"
    return first


def instruction_summary(read: CaseText) -> tuple[str, list[dict]]:
    """The finding that records set-aside text: its summary and data (each sentence, verbatim, with
    the evidence it came from). The summary does not repeat the words: findings' summaries reach
    later agents outside the untrusted-evidence blocks, so the quotation stays in the data."""
    items = [{"evidence_id": pk, "quote": sentence} for pk, sentences in read.set_aside.items()
             for sentence in sentences]
    where = sorted({f"E{pk}" for pk in read.set_aside if pk is not None}) + (["the case title"]
                                                                           if None in read.set_aside else [])
    return (f"{ADDRESSED_TO_REVIEWER} ({len(items)} sentence(s) in {', '.join(where)}): approvals, instructions or "
            f"claims of a role, quoted in this finding's data. They were treated as data and changed nothing."), items


# --- what a letter may quote of the consumer ---------------------------------------------------

MAX_NOTICE_QUOTE = 300


def safe_to_quote(quote: str) -> bool:
    """A consumer's sentence a letter may quote: short, without quotation marks of its own, dates,
    claims of what "we" did, or text addressed to the reader."""
    quote = " ".join(str(quote or "").split())
    return bool(quote) and len(quote) <= MAX_NOTICE_QUOTE and not re.search(r"[\"“”‘’]", quote) \
        and not find_dates(quote) and not date_mentions(quote) and not unrecorded_claims(quote) \
        and not is_instruction(quote, in_document=True)


def request_to_address(request) -> str:
    """What a letter must address of the consumer's request (the notice checker's
    `consumer_request`): triage's plain-words statement, or for a request of no known kind the
    consumer's exact sentence when it is safe to quote; "" when nothing is stated or quotable."""
    if isinstance(request, dict) and request.get("kind") == "other":
        quote = " ".join(str(request.get("quote") or "").split())
        return quote if safe_to_quote(quote) else ""
    return request_statement(request)


# --- triage below the confidence threshold ---------------------------------------------------------
CLASSIFICATION_TOPIC_WORDS = ("product", "issue", "triage", "classification", "confidence")


def below_threshold(confidence: float, recorded_product: str, minimum: float) -> bool:
    """Triage needs an analyst when its product confidence is below the threshold and the case records
    no product of its own (as the offline analyst decides), whatever the provider said itself."""
    return not (recorded_product or "").strip() and confidence < minimum


def triage_confidence_dispute(triage: dict, minimum: float) -> dict:
    """The dispute a triage that needs an analyst raises, when the adjudication has none on it."""
    return {"topic": "triage confidence",
            "positions": [f"triage: best guess {triage.get('product')} / {triage.get('issue')} "
                          f"(confidence {float(triage.get('confidence') or 0):.2f})",
                          f"threshold: product and issue need confidence ≥ {minimum:.2f}"],
            "resolution": "Needs an analyst: an analyst confirms the product and issue before they are relied on."}


def disputes_classification(topics: list[str]) -> bool:
    return any(word in topic.lower() for topic in topics for word in CLASSIFICATION_TOPIC_WORDS)
