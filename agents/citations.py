"""Citations an agent makes are checked against the evidence itself.

A citation is an evidence id and a quoted span. It is kept only if the evidence belongs to the
case and the quote occurs in that evidence's text (`Evidence.read_text()`), compared modulo
whitespace (the analysts read narratives with line breaks folded), in the text as a model was
shown it: personal data redacted (settings.ARBITER_CONTEXT_REDACTOR), and the CFPB bytes-literal
narrative decoded (agents.text.clean_narrative). A quote of a redacted span ("call me on
[phone]") verifies; a quote of the original personal data does not.
A trailing "…" (a shortened quote) is checked as a prefix. Anything else — an invented quote, a
paraphrase, a quote from another document — is dropped and recorded by the caller.

Provider-agnostic: the case-analysis nodes apply it to the offline analyst and a real model alike.
Where the evidence can say which page an offset is on (`Evidence.page_for_offset`, PDF evidence),
the verified citation carries the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents.text import clean_narrative
from core.redaction import configured_redactor

_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})
MIN_QUOTE_CHARS = 8  # shorter than this, a "quote" would match almost anything


def normalise(text: str) -> str:
    return _SPACE.sub(" ", (text or "").translate(_QUOTES)).strip()


@dataclass
class CitationCheck:
    """The outcome for a batch of citations: which were verified and which dropped (and why)."""
    verified: list[dict] = field(default_factory=list)
    dropped: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"verified": len(self.verified), "dropped": self.dropped}


class EvidenceTexts:
    """The readable texts of a case's evidence, read once per node and cached."""

    def __init__(self, case):
        self.case = case
        self._cache: dict[int, tuple[object, list[str]] | None] = {}

    def redact(self, text: str) -> str:
        names = tuple(n for n in (getattr(self.case, "complainant_name", ""),) if n)
        return configured_redactor()(text, names=names)

    def _load(self, evidence_id: int):
        if evidence_id not in self._cache:
            evidence = self.case.evidence.filter(pk=evidence_id).first() if self.case is not None else None
            if evidence is None:
                self._cache[evidence_id] = None
            else:
                self._cache[evidence_id] = (evidence, _haystacks(evidence.read_text(), self.case))
        return self._cache[evidence_id]

    def locate(self, evidence_id, quote: str) -> tuple[bool, str, dict]:
        """(verified, why not, where): where = {"offset": int, "page": int | None} when verified."""
        try:
            evidence_id = int(evidence_id)
        except (TypeError, ValueError):
            return False, "no evidence id", {}
        loaded = self._load(evidence_id)
        if loaded is None:
            return False, f"E{evidence_id} is not evidence of this case", {}
        needle = normalise(quote)
        prefix_only = needle.endswith("…")
        needle = needle.rstrip("…").rstrip()
        if len(needle) < MIN_QUOTE_CHARS:
            return False, "the quote is too short to verify", {}
        evidence, haystacks = loaded
        for haystack in haystacks:
            offset = haystack.find(needle)
            if offset >= 0:
                page_for_offset = getattr(evidence, "page_for_offset", None)
                page = None
                if callable(page_for_offset):
                    try:
                        page = page_for_offset(offset)
                    except Exception:  # noqa: BLE001 - a page number is a nicety, never a failure
                        page = None
                return True, "", {"offset": offset, "page": page, "prefix": prefix_only}
        return False, f"the quote does not occur in E{evidence_id}", {}


def _haystacks(raw: str, case) -> list[str]:
    """The evidence text as the model was shown it: redacted by the configured redactor (what
    agents.context puts in every model context), and also with the CFPB narrative decoded, before or
    after redaction (the offline analyst decodes what it is given). The original text is not a
    haystack: a quote is verified only against what the model could read, so a quote that holds
    personal data cannot verify and be stored in a finding."""

    redact = configured_redactor()
    names = tuple(n for n in (getattr(case, "complainant_name", ""),) if n)
    redacted = redact(raw, names=names)
    texts = [redacted, clean_narrative(redacted), redact(clean_narrative(raw), names=names)]
    seen, out = set(), []
    for text in texts:
        normalised = normalise(text)
        if normalised not in seen:
            seen.add(normalised)
            out.append(normalised)
    return out


def verify_citations(texts: EvidenceTexts, items: list[dict], *, quote_key: str = "quote",
                     id_key: str = "evidence_id", what: str = "citation") -> CitationCheck:
    """Check each item's (evidence id, quote). Verified items are returned with "page" when known;
    dropped ones are recorded as {"what", "evidence_id", "quote", "reason"}."""
    check = CitationCheck()
    for item in items:
        quote = str(item.get(quote_key) or "")
        ok, why, where = texts.locate(item.get(id_key), quote)
        if ok:
            check.verified.append(item | ({"page": where["page"]} if where.get("page") is not None else {}))
        else:
            # The dropped quote is stored in a finding and a note: redacted, in case it holds
            # personal data the model was never shown (an invented account number, say).
            check.dropped.append({"what": what, "evidence_id": item.get(id_key), "quote": texts.redact(quote)[:300],
                                  "reason": why})
    return check


def signal_words(signal: dict) -> str:
    """A risk signal in words, for a person: its description without the quote it ends with, and
    without a parenthesis that only repeats words of that quote (the detector's match, often a
    fragment: "Identity theft (opened without my)" reads "Identity theft"); a parenthesis that adds
    something stays ("$2,000.00 lost, charged or asked back (above $1,000)"). Its code if it has no
    description."""
    text = str(signal.get("description") or signal.get("code") or "").strip()
    head, *rest = re.split(r":\s*[“\"]", text, maxsplit=1)
    quote = " ".join(str(signal.get("quote") or (rest[0] if rest else "")).split()).lower()
    match = re.search(r"\s*\(([^()]*)\)", head)
    if match and quote and " ".join(match.group(1).split()).lower() in quote:
        head = head[:match.start()] + head[match.end():]
    return " ".join(head.split())


def signals_in_words(words: list[str]) -> str:
    """Signals' words as one list after "because of:": "identity theft; harassment; $2,000.00 lost…".
    Each item starts in lower case unless it starts with an abbreviation or a figure."""
    def lowered(word: str) -> str:
        word = word.rstrip(".")
        return word[0].lower() + word[1:] if len(word) > 1 and word[0].isupper() and not word[1].isupper() else word
    return "; ".join(lowered(w) for w in dict.fromkeys(words) if w)


def evidence_quote(signals: list[dict]) -> str:
    """The quotation that follows "Risk … because of: …": the first quoted signal's exact words
    (whitespace folded). When more than one signal is named, the sentence says which one the quote
    shows ("The evidence of repeated contact: “…”"): it may not be the first one listed, and a reader
    would take it for the evidence of all of them. "" when no signal has a quote."""
    quoted = next((s for s in signals if isinstance(s, dict) and s.get("quote")), None)
    if quoted is None:
        return ""
    quote = " ".join(str(quoted["quote"]).split())
    named = {str(s.get("code") or signal_words(s)) for s in signals if isinstance(s, dict)}
    if len(named) > 1 and quoted.get("code") in CODE_WORDS:
        return f"The evidence of {code_words(quoted['code'])}: “{quote}”"
    return f"The evidence says: “{quote}”"


def dispute_in_words(dispute: dict) -> str:
    """A dispute between the agents as one line for a person: "Dispute on the product (narrative and
    company prior): <positions>. <resolution>". The positions ("narrative: reads like X", "company
    prior: usually Y") are left out when the resolution already says each of them in a sentence —
    they would be read twice."""
    topic = str(dispute.get("topic") or "analysis")
    head, _, aspect = topic.partition(":")
    title = f"Dispute on the {head.strip()}" + (f" ({aspect.strip()})" if aspect.strip() else "")
    positions = [str(p) for p in dispute.get("positions") or [] if str(p).strip()]
    resolution = " ".join(str(dispute.get("resolution") or "").split())
    said = resolution.lower()
    if resolution and positions and all(p.split(":", 1)[-1].strip().lower() in said for p in positions):
        return f"{title}: {resolution}"
    return " ".join(part for part in (f"{title}: {' vs. '.join(positions)}.", resolution) if part)


# --- codes in words ----------------------------------------------------------------------------
# Policy rules and risk signals have short codes (cases/policy.py, analyst/signals.py). A
# person reads the words first; the code appears only in a detail section, next to its words.
CODE_WORDS = {
    "ACK-15": "acknowledge within 15 days",
    "CLOSE-60": "final response within 60 days",
    "SCRA": "servicemember protections",
    "OLDER-AM": "an older American",
    "FRAUD-ID": "fraud or identity theft",
    "MONEY-LOSS": "money lost above $1,000",
    "HARASSMENT": "harassment",
    "URGENCY": "time-critical harm",
    "TIME-LIMIT": "a legal time limit",
    "MISCONDUCT": "misconduct by the company",
    "REPEAT-CONTACT": "repeated contact",
}
# What a person would call an internal code: ACK-15, FRAUD-ID, N61, E3, P12 (and the bare codes above).
INTERNAL_CODE = re.compile(r"\b[A-Z]+-\d+\b|\b[A-Z]+-[A-Z]+\b|\b[NPEAF]\d+\b|\b(?:SCRA|HARASSMENT|URGENCY|MISCONDUCT)\b")


def code_words(code: str) -> str:
    """A rule or signal code in words ("acknowledge within 15 days"); the code itself if unknown."""
    return CODE_WORDS.get(str(code), str(code))


def code_with_words(code: str) -> str:
    """For a detail section: "ACK-15 (acknowledge within 15 days)"."""
    words = CODE_WORDS.get(str(code))
    return f"{code} ({words})" if words else str(code)


def spell_out_codes(text: str) -> str:
    """`text` with every known code replaced by its words, and evidence ids (E3) by "the evidence"
    — for the paragraph a person reads first, whoever wrote it."""
    for code in sorted(CODE_WORDS, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(code)}\b", CODE_WORDS[code], text)
    return re.sub(r"\bE\d+\b", "the evidence", text)


def has_internal_code(text: str) -> bool:
    return bool(INTERNAL_CODE.search(text or ""))
