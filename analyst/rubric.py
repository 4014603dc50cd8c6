"""The notice rubric: what a supervisor or a consumer reads first, counted for faults that must be zero.

Over a notice (subject and body) and the first paragraphs of the proposals' rationales of a case:

- misquotes: a quoted span of the notice that does not occur in the evidence;
- placeholders: an agent's placeholder text (cases.notice_checker.PLACEHOLDERS) in the notice or a
  first paragraph;
- codes in first paragraphs / codes in notices: an internal code (a signal code, a rule id) where a
  supervisor or consumer reads first (the case's own reference is not one, nor a consumer's own words
  quoted verbatim from the evidence: "RE-INVESTIGATION" written in capitals is theirs);
- implied contact: a sentence of the notice implying contact that nothing records ("we are working
  with …", "we have contacted …"); a pattern of its own, independent of the checker's, read with the
  CFPB taxonomy's labels left out (the issue "Dealing with your lender or servicer" names a category,
  it claims no contact);
- unverified quotes: a quoted span of a first paragraph that does not occur in the evidence;
- checker flags: the notice checker's flags on the notice.

The tests hold the offline analyst to zero on real complaints (tests/runs/test_signable_words.py), and
`manage.py evaluate` reports the counts over every analysis, whatever the provider.
"""

from __future__ import annotations

import re
from functools import lru_cache

from agents import taxonomy
from agents.citations import has_internal_code
from agents.graphs.guards import first_paragraph
from cases.notice_checker import PLACEHOLDERS, check_notice, misquotes, quote_occurs

IMPLIED_CONTACT = re.compile(r"\bwe (?:are|have been|will be) (?:\w+ ){0,3}with\b|\bwith (?:the company|your lender)\b"
                             r"|\bwe have (?:contacted|spoken|asked|called|written)\b", re.IGNORECASE)
QUOTED = re.compile(r"“([^”]*)”|\"([^\"]*)\"")


@lru_cache(maxsize=1)
def _taxonomy_labels() -> re.Pattern:
    labels = sorted({*taxonomy.products(), *taxonomy.issues(), *taxonomy.sub_issues()}, key=len, reverse=True)
    return re.compile("|".join(re.escape(label) for label in labels if label), re.IGNORECASE)


def ours(text: str, evidence: list[str]) -> str:
    """`text` without its quotations that occur verbatim in the evidence: the words left are the
    writer's own. A quotation not in the evidence stays (and is counted as a misquote or an
    unverified quote besides)."""
    def keep_unless_verbatim(match: re.Match) -> str:
        span = match.group(1) if match.group(1) is not None else match.group(2)
        return " " if span.strip() and quote_occurs(span, evidence) else match.group(0)
    return QUOTED.sub(keep_unless_verbatim, text or "")


def implied_contact(text: str) -> int:
    """The sentences of `text` implying contact (IMPLIED_CONTACT), the taxonomy's labels left out."""
    return len(IMPLIED_CONTACT.findall(_taxonomy_labels().sub(" ", text or "")))


RUBRIC_COUNTS = ("misquotes", "placeholders", "codes in first paragraphs", "codes in notices", "implied contact",
                 "unverified quotes", "checker flags")


def notice_rubric(case, notice: dict | None, rationales: list[str], evidence: list[str]) -> dict[str, int]:
    """The rubric's counts (RUBRIC_COUNTS) for one notice ({"subject", "body"}, or None when there is
    none: its counts are then zero) and the rationales of the case's proposals, against the evidence texts."""
    subject, body = (notice["subject"], notice["body"]) if notice else ("", "")
    text = f"{subject}\n{body}" if notice else ""
    firsts = [first_paragraph(r)[0] for r in rationales]
    quoted_in_firsts = [a or b for first in firsts for a, b in QUOTED.findall(first)]
    return {
        "misquotes": len(misquotes(text, evidence)),
        "placeholders": sum(p.lower() in t.lower() for p in PLACEHOLDERS for t in [text, *firsts] if t),
        "codes in first paragraphs": sum(has_internal_code(ours(first, evidence)) for first in firsts),
        "codes in notices": int(has_internal_code(ours(text.replace(case.reference, ""), evidence))) if notice else 0,
        "implied contact": implied_contact(text),
        "unverified quotes": len(misquotes("".join(f"“{q}”" for q in quoted_in_firsts), evidence)),
        "checker flags": len(check_notice(case=case, recipient=case.complainant_email, subject=subject,
                                          body=body)) if notice else 0,
    }


def case_rubric(case, notices: list, rationales: list[str], evidence: list[str]) -> dict[str, int]:
    """The rubric summed over every notice of a case, the rationales counted once (with no notice:
    the rationales alone)."""
    totals = dict.fromkeys(RUBRIC_COUNTS, 0)
    for index, notice in enumerate(notices or [None]):
        counts = notice_rubric(case, None if notice is None else {"subject": notice.subject, "body": notice.body},
                               rationales if index == 0 else [], evidence)
        for key, value in counts.items():
            totals[key] += value
    return totals
