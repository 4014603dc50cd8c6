"""Evidence previews on the case page, and the quoted span of a citation marked in them.

A proposal an agent made cites evidence with quotes: the signals of its run's risk assessment
(`runs.Artifact` kind "risk_assessment", each signal {"evidence_id", "quote", ...}), which
agents.citations verified against the evidence text modulo whitespace and typographic quotes.
`mark_quote` finds the same span the same way — on the text as shown, mapped back to its
characters — escapes everything, and wraps only the span in `<mark>`. The raw evidence text is never
put into the page unescaped: the pieces are escaped one by one and only the `<mark>` tags are ours.

Which quote to mark comes from the server's own list (proposal id and the quote's position in it),
never from text in the URL: a link cannot make the page highlight words nobody cited."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from agents.citations import MIN_QUOTE_CHARS, signal_words
from agents.text import clean_narrative
from runs.models import Artifact

FILE_TEXT_CHARS = 200_000  # a text file is read up to this much for its preview (and a quote in it)
PREVIEW_CHARS = 4000  # a preview shows at most this much text, unless a quote is marked in it
CONTEXT_CHARS = 1500  # around a marked quote in a long text, this much before and after is shown
_SPACE = re.compile(r"\s")
_TYPOGRAPHIC = {"“": '"', "”": '"', "‘": "'", "’": "'"}


@dataclass(frozen=True)
class CitedQuote:
    """One quote a proposal cites: `key` ("<proposal pk>.<index>") names it in a link."""

    key: str
    evidence_id: int
    quote: str
    what: str  # the finding that cites it, in words ("Loss above $1,000")


def display_text(evidence) -> str:
    """The evidence text a person reads in the preview: a text evidence (a CFPB narrative exported
    as a bytes literal is decoded, as the agents read it), a text file's content (read as the agents
    read it, `Evidence.read_text`) or a file's extracted text ("" if none, or if the file is gone)."""
    if evidence.kind == "text":
        return clean_narrative(evidence.text) if (evidence.text or "").lstrip().startswith(("b'", 'b"')) \
            else (evidence.text or "")
    content_type = evidence.content_type or ""
    if content_type.startswith("text/") or content_type == "application/json":
        try:
            return evidence.read_text(limit=FILE_TEXT_CHARS)
        except (OSError, ValueError):  # the stored file is missing or unreadable: no preview, not a 500
            return ""
    extraction = evidence.extraction_or_none
    if extraction is not None and extraction.status == "readable":
        return extraction.text or ""
    return ""


def _normalised_with_positions(text: str) -> tuple[str, list[int]]:
    """`text` with every whitespace run folded to one space and typographic quotes made plain (as
    agents.citations.normalise does), and for each character kept, its index in `text`."""
    chars: list[str] = []
    positions: list[int] = []
    in_space = False
    for index, char in enumerate(text):
        if _SPACE.match(char):
            if not in_space and chars:
                chars.append(" ")
                positions.append(index)
            in_space = True
            continue
        in_space = False
        chars.append(_TYPOGRAPHIC.get(char, char))
        positions.append(index)
    return "".join(chars), positions


def _needle(quote: str) -> str:
    folded, _ = _normalised_with_positions(quote or "")
    return folded.strip().rstrip("…").rstrip()  # a trailing "…" marks a shortened quote: a prefix


def find_quote(text: str, quote: str) -> tuple[int, int] | None:
    """The [start, end) characters of `text` that `quote` cites, compared modulo whitespace and
    typographic quotes; None if it does not occur (or is too short to mean anything)."""
    needle = _needle(quote)
    if len(needle) < MIN_QUOTE_CHARS:
        return None
    haystack, positions = _normalised_with_positions(text or "")
    offset = haystack.find(needle)
    if offset < 0:
        return None
    return positions[offset], positions[offset + len(needle) - 1] + 1


@dataclass(frozen=True)
class Preview:
    html: SafeString  # escaped text, with at most one <mark>
    marked: bool  # the quote was found and marked
    truncated_before: bool
    truncated_after: bool


def preview(text: str, *, quote: str = "", mark_id: str = "", whole: bool = False) -> Preview:
    """The preview of `text`: the first PREVIEW_CHARS characters (all of it if `whole`), or — with a
    quote found in it — the passage around the quote (or all of it) with the quote in
    `<mark id=mark_id tabindex=-1>`. Always escaped."""
    text = text or ""
    span = find_quote(text, quote) if quote else None
    if span is None:
        shown = text if whole else text[:PREVIEW_CHARS]
        return Preview(html=escape(shown), marked=False, truncated_before=False,
                       truncated_after=len(text) > len(shown))
    start, end = span
    window_start = 0 if whole else max(0, start - CONTEXT_CHARS)
    window_end = len(text) if whole else min(len(text), max(end + CONTEXT_CHARS, window_start + PREVIEW_CHARS))
    # The focus moves to the mark after the click that asked for it (static/js/arbiter.js).
    attributes = f' id="{escape(mark_id)}" tabindex="-1" data-focus-after-swap' if mark_id else ""
    html = (escape(text[window_start:start]) + f"<mark{attributes}>" + escape(text[start:end]) + "</mark>"
            + escape(text[end:window_end]))
    return Preview(html=mark_safe(html), marked=True, truncated_before=window_start > 0,  # noqa: S308 - escaped above
                   truncated_after=window_end < len(text))


def parse_quote_key(value: str) -> tuple[int, int] | None:
    """"<proposal pk>.<index>" -> (pk, index); None for anything else."""
    match = re.fullmatch(r"([0-9]{1,12})\.([0-9]{1,4})", value or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


@dataclass(frozen=True)
class AgentReasons:
    """What an agent's risk assessment rests on, for a proposal its run made: the reasons in words
    (one per signal) and the quotes it cites from this case's evidence."""

    reasons: list[str]
    quotes: list[CitedQuote]


def agent_reasons(*, tenant_id: int, proposals: list, evidence_ids: set[int]) -> dict[int, AgentReasons]:
    """For each proposal an agent run made, its run's risk assessment: the signals in words and the
    quotes they cite from evidence of this case (one query for the page). The assessment read is
    the last one the run made before the proposal (a run may re-assess after a re-plan)."""

    by_run: dict[str, list] = {}
    run_ids = {str(p.run_id) for p in proposals if str(p.run_id or "").isdigit()}
    if run_ids:
        for artifact in Artifact.objects.filter(tenant_id=tenant_id, run_id__in=[int(r) for r in run_ids],
                                                kind="risk_assessment").order_by("created_at", "id"):
            by_run.setdefault(str(artifact.run_id), []).append(artifact)
    found: dict[int, AgentReasons] = {}
    for proposal in proposals:
        assessments = [a for a in by_run.get(str(proposal.run_id), []) if a.created_at <= proposal.created_at]
        if not assessments:
            continue
        reasons: list[str] = []
        quotes: list[CitedQuote] = []
        seen: set[tuple[int, str]] = set()
        for signal in (assessments[-1].content or {}).get("signals") or []:
            if not isinstance(signal, dict):
                continue
            what = signal_words(signal)
            if what and what not in reasons:
                reasons.append(what)
            quote, evidence_id = str(signal.get("quote") or "").strip(), signal.get("evidence_id")
            if not quote or not str(evidence_id).isdigit() or int(evidence_id) not in evidence_ids:
                continue
            if (int(evidence_id), quote) in seen:
                continue
            seen.add((int(evidence_id), quote))
            quotes.append(CitedQuote(key=f"{proposal.pk}.{len(quotes)}", evidence_id=int(evidence_id), quote=quote,
                                     what=what))
        found[proposal.pk] = AgentReasons(reasons=reasons, quotes=quotes)
    return found
