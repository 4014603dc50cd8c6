"""Text helpers for the offline analyst: cleaning CFPB narratives, splitting sentences, finding
money amounts and dates, and setting aside sentences addressed to the assistant (prompt
injection). Everything here is pure and deterministic."""

from __future__ import annotations

import ast
import re
import warnings
from decimal import Decimal, InvalidOperation

# One narrative in the CFPB sample is a Python bytes literal ("b'Loan#: ...\\n...'"), as some
# exporters write it. It is decoded with literal_eval (no code runs: only literals are accepted).
_BYTES_LITERAL = re.compile(r"""^b(['"]).*\1$""", re.DOTALL)


def clean_narrative(text: str | None) -> str:
    """The narrative as readable text: bytes literals decoded, whitespace normalised."""
    text = (text or "").strip()
    if _BYTES_LITERAL.match(text):
        try:
            with warnings.catch_warnings():  # "\X" in scrubbed text is an invalid escape: harmless
                warnings.simplefilter("ignore")
                value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, bytes):
            text = value.decode("utf-8", errors="replace")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# A sentence ends at . ! ? (not inside "U.S." style abbreviations or amounts) or at a blank line.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[{$])|\n\s*\n|\n(?=[A-Z][^\n]{0,40}:)")
_ABBREVIATIONS = ("U.S.", "Mr.", "Mrs.", "Ms.", "Dr.", "Inc.", "Co.", "No.", "St.", "Jr.", "Sr.", "vs.", "e.g.",
                  "i.e.", "etc.", "approx.", "Dept.")


def split_sentences(text: str) -> list[str]:
    """Sentences of a narrative, in order, each stripped and with inner newlines folded."""
    pieces: list[str] = []
    carry = ""
    for piece in _SENTENCE_END.split(text or ""):
        if piece is None:
            continue
        piece = (carry + " " + piece).strip() if carry else piece.strip()
        carry = ""
        if not piece:
            continue
        if piece.endswith(_ABBREVIATIONS):
            carry = piece
            continue
        pieces.append(re.sub(r"\s*\n\s*", " ", piece))
    if carry:
        pieces.append(re.sub(r"\s*\n\s*", " ", carry))
    return [p for p in pieces if re.search(r"[A-Za-z]", p)]


# {$1100.00} is how the CFPB export writes amounts; narratives also use $1,100 or $ 1100.50.
_MONEY = re.compile(r"\{\$\s?(?P<braced>[\d,]+(?:\.\d+)?)\}|\$\s?(?P<plain>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
                    r"(?:\s?(?P<scale>k|K|thousand|million)\b)?")


def money_amounts(text: str) -> list[Decimal]:
    """Every dollar amount stated in the text, as Decimals, in order of appearance."""
    amounts = []
    for match in _MONEY.finditer(text or ""):
        raw = (match.group("braced") or match.group("plain") or "").replace(",", "")
        try:
            value = Decimal(raw)
        except InvalidOperation:
            continue
        scale = (match.group("scale") or "").lower()
        if scale in ("k", "thousand"):
            value *= 1000
        elif scale == "million":
            value *= 1_000_000
        amounts.append(value)
    return amounts


_MONTHS = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE = re.compile(
    r"\b(?:\d{1,2}|XX)/(?:\d{1,2}|XX)/(?:\d{2,4}|XXXX)\b"  # 03/14/2025, XX/XX/2019, XX/XX/XXXX
    rf"|\b{_MONTHS}\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?\d{{4}}\b"  # March 3, 2025 / March 2025
    r"|\b\d{4}-\d{2}-\d{2}\b",
    re.IGNORECASE,
)


def date_mentions(text: str) -> list[str]:
    return [m.group(0) for m in _DATE.finditer(text or "")]


# Sentences that speak to the assistant rather than describe the complaint. They are data like
# everything else in evidence; the analyst sets them aside so they cannot steer any output.
_INSTRUCTION_PATTERNS = [
    r"\b(?:ignore|disregard|forget|override)\b[^.!?\n]{0,60}\b(?:instruction|instructions|prompt|rules|guidelines|polic(?:y|ies))\b",
    r"\byou are now\b",
    r"\byou (?:are|have been) (?:hereby )?(?:authori[sz]ed|permitted|allowed|instructed)\b",
    r"\bi (?:hereby )?authori[sz]e you\b",
    r"\b(?:system|developer) (?:prompt|message|instruction)s?\b",
    r"\b(?:as|dear) (?:an? )?(?:ai|assistant|language model|llm|agent)\b",
    r"\b(?:assistant|ai|agent|model)\s*[:,]\s*(?:please\s+)?(?:approve|send|close|mark|set|ignore)\b",
    r"\bnew instructions?\b",
    r"\b(?:approve|authori[sz]e) (?:this|the) (?:case|proposal|notice|refund|request) (?:now|immediately)\b",
    r"\bsend the notice (?:now|immediately|without)\b",
    r"\bwithout (?:waiting for )?(?:approval|review|a supervisor)\b",
]
_INSTRUCTION = re.compile("|".join(_INSTRUCTION_PATTERNS), re.IGNORECASE)
# In a document (not in an analyst's own chat message), an imperative about the workbench's own
# objects is also an instruction: "Set the risk to low.", "Close the case."
_WORKBENCH_IMPERATIVE = re.compile(
    r"^\W*(?:please\s+)?(?:set|change|lower|raise|mark|close|approve|send|assign|escalate|reopen)\b[^.!?]{0,40}"
    r"\b(?:risk(?: level)?|this case|the case|notice|proposal|status)\b", re.IGNORECASE)


def is_instruction(sentence: str, *, in_document: bool = False) -> bool:
    """Does this sentence address the assistant (an attempted instruction) rather than state facts?
    `in_document`: the sentence comes from evidence, where workbench imperatives count too."""
    sentence = sentence or ""
    return bool(_INSTRUCTION.search(sentence) or (in_document and _WORKBENCH_IMPERATIVE.search(sentence)))


def set_aside_instructions(text: str) -> tuple[str, list[str]]:
    """(the document text without instruction-like sentences, the sentences set aside)."""
    kept, dropped = [], []
    for sentence in split_sentences(text):
        (dropped if is_instruction(sentence, in_document=True) else kept).append(sentence)
    return " ".join(kept), dropped


def first_sentence(text: str, limit: int = 240) -> str:
    sentences = split_sentences(text)
    sentence = sentences[0] if sentences else (text or "").strip()
    return shorten(sentence, limit)


def shorten(text: str, limit: int) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2:]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:") + "…"
