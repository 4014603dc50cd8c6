"""The notice checker: is a notice grounded in what the case records?

It runs on every draft and edit, whoever wrote it (cases.services.notices), and again when a
person approves (a date that was in the future may have passed). The result is stored on the
notice with the content hash it was computed for and shown on the notice card. Each problem is a
flag `{"code", "message"}`:

- `past_date`: a date before today (the case's received date may be cited: it is a fact on record,
  not a promise);
- `date_not_due`: a date that is none of the case's stored due dates;
- `unrecorded_action`: "we have asked / reviewed / refunded / contacted …" with no recorded event
  on the case that shows it;
- `wrong_reference`, `wrong_recipient`, `wrong_company`, `wrong_product`, `wrong_issue`: the
  notice names another case's reference, another recipient, or a company / product / issue of
  another case of the tenant and not this case's;
- `request_not_addressed`: the consumer's request (extracted by the agents) is not addressed;
- `instruction_like`: text that reads as an instruction or a claim of authority ("the supervisor
  has already approved this", "ignore previous instructions");
- `unquoted_evidence`: eight or more consecutive words of the case's evidence outside quotation
  marks (evidence may be quoted, never restated as the writer's own words);
- `misquote`: a span in quotation marks (straight or curly, double or single) that does not occur
  in the case's evidence (compared with whitespace and quotation marks normalised, letters as
  written): a quotation is the consumer's own words or it is not in quotation marks;
- `implied_contact`: a sentence implying that we are in contact or working with someone
  ("reviewing the information you provided with <company>"); no event records such contact;
- `placeholder`: an agent's placeholder ("No specific request is stated in the evidence.")
  carried into the letter.

Quoted text is read like the rest for dates, claimed actions and findings: a past date or a false
"we have refunded" is not made true by quotation marks. When the response is already late, a date
at most COMMITMENT_DAYS ahead is accepted: the date the letter commits to in its apology.

An agent's flagged draft is never submitted; a person may approve over flags with a reason,
recorded on the approval (cases.services.notices)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from django.utils import timezone

from cases.models import Case

MONTHS = {name: index for index, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], start=1)}
_MONTH = r"(January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE_PATTERNS = (
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), lambda m: (int(m[1]), int(m[2]), int(m[3]))),
    (re.compile(rf"\b(\d{{1,2}}) {_MONTH},? (\d{{4}})\b", re.IGNORECASE),
     lambda m: (int(m[3]), MONTHS[m[2].lower()], int(m[1]))),
    (re.compile(rf"\b{_MONTH} (\d{{1,2}}),? (\d{{4}})\b", re.IGNORECASE),
     lambda m: (int(m[3]), MONTHS[m[1].lower()], int(m[2]))),
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b"), lambda m: (int(m[3]), int(m[1]), int(m[2]))),  # US m/d/Y
)

# A claimed action and the recorded events that show it (event type, optional transition name).
_CLAIM = re.compile(
    r"\bwe(?:\s+have|'ve|\s+had)?\s+(?:now\s+|already\s+|also\s+|since\s+)?"
    r"(asked|requested|instructed|forwarded|reviewed|investigated|examined|completed|resolved|refunded|reimbursed"
    r"|credited|corrected|removed|deleted|contacted|called|phoned|emailed|written to|wrote to|spoken|spoke"
    r"|escalated|closed|sent|paid|waived|cancell?ed|found|determined|concluded|confirmed|verified|established)\b",
    re.IGNORECASE)
_CLAIM_EVIDENCE: dict[str, tuple[tuple[str, str | None], ...]] = {
    "asked": (("case.transitioned", "request_evidence"),),
    "requested": (("case.transitioned", "request_evidence"),),
    "instructed": (("case.transitioned", "request_evidence"),),
    "forwarded": (("case.assigned", None),),
    "escalated": (("case.assigned", None),),
    "reviewed": (("case.transitioned", "decide"),),
    "investigated": (("case.transitioned", "decide"),),
    "examined": (("case.transitioned", "decide"),),
    "completed": (("case.transitioned", "decide"),),
    "resolved": (("case.transitioned", "decide"),),
    "closed": (("case.transitioned", "close"),),
    "found": (("case.transitioned", "decide"),),
    "determined": (("case.transitioned", "decide"),),
    "concluded": (("case.transitioned", "decide"),),
    "confirmed": (("case.transitioned", "decide"),),
    "verified": (("case.transitioned", "decide"),),
    "established": (("case.transitioned", "decide"),),
    "contacted": (("notice.sent", None),),
    "called": (("notice.sent", None),),
    "phoned": (("notice.sent", None),),
    "emailed": (("notice.sent", None),),
    "written to": (("notice.sent", None),),
    "wrote to": (("notice.sent", None),),
    "spoken": (("notice.sent", None),),
    "spoke": (("notice.sent", None),),
    "sent": (("notice.sent", None),),
    # Money moved or records changed: nothing in Arbiter records these, so a claim is never grounded.
    "refunded": (), "reimbursed": (), "credited": (), "corrected": (), "removed": (), "deleted": (),
    "paid": (), "waived": (), "cancelled": (), "canceled": (),
}

_INSTRUCTION_LIKE = re.compile(
    r"\bignore (?:all |any |the |your )?(?:previous |prior |above |earlier )?instructions\b"
    r"|\bdisregard (?:all |any |the |your )?(?:previous |prior |above |earlier )?instructions\b|\bsystem prompt\b"
    r"|\bsystem override\b"
    r"|\b(?:has|have|had|was|were|is|are) (?:already )?(?:been )?(?:approved|authori[sz]ed|cleared) (?:this|the|by)\b"
    r"|\b(?:supervisor|manager|compliance|legal) (?:has|have) (?:already )?(?:approved|authori[sz]ed|signed off)\b"
    r"|\byou (?:must|should|are instructed to) (?:now )?(?:approve|send|close|decide|mark|refund)\b"
    r"|\bas an ai\b|\bdo not (?:tell|inform|mention)\b|\b(?:assistant|agent|model)[,:] (?:please )?(?:approve|send|close)\b",
    re.IGNORECASE)
_REFERENCE = re.compile(r"\bCASE-\d{4}-\d{6}\b")
_QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|‘[^’]*’(?!\w)")
_QUOTE_CHARS = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})
_SPACE = re.compile(r"\s+")
# "We are reviewing the information you provided with Example Bank", "we are in touch with the
# company", "we are working with your lender": contact no event on a case records.
_IMPLIED_CONTACT = re.compile(
    r"\bwe(?:\s+are|'re|\s+have\s+been|\s+will\s+be)\s+(?:now\s+|currently\s+)?(?:in (?:touch|contact|discussions?)"
    r"|speaking|talking|working|liaising|corresponding|following (?:this|it) up)\s+with\b"
    r"|\b(?:reviewing|discussing|raising|sharing|looking into|following up)\b[^.!?\n]{0,80}\bwith\s+(?:the company"
    r"|the bank|the lender|the servicer|the respondent|the creditor|your (?:lender|bank|servicer|creditor))\b",
    re.IGNORECASE)
PLACEHOLDERS = ("No specific request is stated in the evidence.", "No specific remedy is stated in the evidence.",
                "not asked in so many words", "Respondent not recorded", "Unclassified (no narrative to classify)")
COMMITMENT_DAYS = 10
_WORD = re.compile(r"[a-z0-9']+")
SHINGLE = 8
_STOPWORDS = frozenset("the a an and or of to in on for with my i me we our you your is are was were be been it this "
                       "that they them their have has had not no but at by from as so if do did does am can will "
                       "would could should".split())
EVIDENCE_SCAN_CHARS = 50_000  # per evidence item
NO_REQUEST = "No specific remedy is stated in the evidence."
NO_REQUEST_STATED = "No specific request is stated in the evidence."
IMPLIED_PREFIX = "Implied by the narrative: "
IMPLIED_SUFFIX = re.compile(r"\s*\(implied by the narrative[^)]*\)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class NoticeText:
    recipient: str
    subject: str
    body: str


def _flag(code: str, message: str) -> dict:
    return {"code": code, "message": message}


def find_dates(text: str) -> list[tuple[str, date]]:
    found = []
    for pattern, parts in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            try:
                found.append((match.group(0), date(*parts(match))))
            except ValueError:
                continue  # "2026-02-30" is not a date; it is not a promise either
    return found


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _normalise(text: str) -> str:
    return " ".join(_words(text))


def request_statement(consumer_request) -> str:
    """The consumer's request as a statement: `consumer_request["statement"]` (triage's
    structured field) when present, else the `requested_remedy` string; "" when none is stated
    (either placeholder, a request of kind "none", or one only implied by the narrative)."""
    if isinstance(consumer_request, dict):
        if str(consumer_request.get("kind") or "") == "none":
            return ""
        text = str(consumer_request.get("statement") or "").strip()
    else:
        text = str(consumer_request or "").strip()
    if text.startswith(IMPLIED_PREFIX) or IMPLIED_SUFFIX.search(text):
        return ""  # implied is not stated: the letter does not tell the consumer what they asked for
    if not text or text in (NO_REQUEST, NO_REQUEST_STATED):
        return ""
    return text


def normalise_quote(text: str) -> str:
    """Whitespace folded and typographic quotation marks made straight; letters kept as written."""
    return _SPACE.sub(" ", (text or "").translate(_QUOTE_CHARS)).strip()


def quoted_spans(text: str) -> list[str]:
    """The text inside each pair of quotation marks (straight or curly, double or single)."""
    return [match.group(0)[1:-1] for match in _QUOTED.finditer(text or "")]


def quote_occurs(span: str, evidence_texts: list[str]) -> bool:
    """Does the quoted span occur in one of the evidence texts? A trailing "…" marks a shortened
    quote (its start must occur); a closing punctuation mark inside the quotation marks may be the
    writer's."""
    needle = normalise_quote(span)
    candidates = [needle]
    if needle.endswith("…"):
        candidates = [needle.rstrip("…").rstrip()]
    candidates.append(candidates[0].rstrip(".,;:!?").rstrip())
    haystacks = [normalise_quote(text) for text in evidence_texts]
    return any(candidate and candidate in haystack for candidate in candidates for haystack in haystacks)


def misquotes(text: str, evidence_texts: list[str]) -> list[str]:
    """The quoted spans of `text` that do not occur in the evidence."""
    return [span for span in quoted_spans(text) if span.strip() and not quote_occurs(span, evidence_texts)]


def request_addressed(statement: str, text: str) -> bool:
    """Addressed: the statement is quoted or restated (at least 60% of its content words appear)."""
    wanted = _normalise(statement.rstrip("…"))
    have = _normalise(text)
    if wanted and wanted in have:
        return True
    content = {w for w in _words(statement) if len(w) > 3 and w not in _STOPWORDS}
    if not content:
        return True
    present = set(_words(text))
    return len(content & present) / len(content) >= 0.6


def unrecorded_claims(text: str) -> list[str]:
    """The phrases of `text` that claim something we did ("we have refunded", "we found"), whatever
    the case records: a drafter leaves such text out of what it quotes."""
    return [match.group(0) for match in _CLAIM.finditer(text or "")]


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def _unquoted_evidence(text: str, evidence_texts: list[str]) -> str | None:
    outside = _QUOTED.sub(" \u2016 ", text)  # a marker no shingle can cross
    parts = [_words(part) for part in outside.split("\u2016")]
    mine: dict[tuple[str, ...], None] = {}
    for words in parts:
        for shingle in _shingles(words):
            mine[shingle] = None
    if not mine:
        return None
    for evidence in evidence_texts:
        overlap = _shingles(_words(evidence[:EVIDENCE_SCAN_CHARS])) & mine.keys()
        if overlap:
            return " ".join(sorted(overlap)[0])
    return None


def _vocabulary_flags(text_lower: str, *, value: str, others: list[str], code: str, what: str) -> list[dict]:
    mine = (value or "").strip().lower()
    flags = []
    for other in others:
        name = (other or "").strip().lower()
        if len(name) < 6 or name == mine or name in mine or (mine and mine in name):
            continue
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text_lower):
            flags.append(_flag(code, f"It names the {what} “{other}”, which is not this case's "
                                     f"({value or 'none recorded'})."))
    return flags


def _wording_flags(text: str, case) -> list[dict]:
    """Implied contact ("reviewing … with <company>") and agents' placeholders."""
    flags: list[dict] = []
    contact = list(_IMPLIED_CONTACT.finditer(text))
    if case.company:
        named = re.compile(r"\b(?:reviewing|discussing|raising|sharing|looking into|following up|in (?:touch|contact)"
                           r"|working|speaking|talking)\b[^.!?\n]{0,80}\bwith\s+" + re.escape(case.company.strip()),
                           re.IGNORECASE)
        contact += list(named.finditer(text))
    for match in contact:
        flags.append(_flag("implied_contact", f"“{match.group(0).strip()}” implies contact or joint work that no "
                                              f"event on the case records."))
    for placeholder in PLACEHOLDERS:
        if placeholder.lower() in text.lower():
            flags.append(_flag("placeholder", f"“{placeholder}” is an agent's placeholder, not words for a letter."))
    return flags


def check_notice(*, case, recipient: str, subject: str, body: str, consumer_request=None,
                 today: date | None = None) -> list[dict]:
    """The flags of a notice's text against `case` (empty: nothing found). Reads the case's events,
    evidence and the tenant's other cases' product / issue / company names."""

    today = today or timezone.localdate()
    text = f"{subject}\n{body}"
    # Names of facts (company, product, reference) are read in the notice's own words only: a
    # verified quotation of the consumer may name another company. Dates, claimed actions and
    # findings are read everywhere, quotations included.
    ours = _QUOTED.sub(" ", text)
    flags: list[dict] = []
    evidence_texts = [e.read_text(limit=EVIDENCE_SCAN_CHARS) for e in case.evidence.all()[:50]]
    for span in misquotes(text, evidence_texts):
        flags.append(_flag("misquote", f"“{span[:200]}” is in quotation marks but does not occur in the case's "
                                       f"evidence: quote the consumer's exact words, or say it without quotation marks."))

    due_dates = {d for d in (case.acknowledge_due, case.response_due, case.close_due) if d}
    late = bool(case.response_due and case.response_due < today
                and not case.events.filter(event_type="notice.sent").exists())
    for shown, when in find_dates(text):
        if case.received_at and when == case.received_at:
            continue
        if when < today:
            flags.append(_flag("past_date", f"“{shown}” is before today ({today.isoformat()}): a notice never "
                                            f"promises a past date."))
        elif late and (when - today).days <= COMMITMENT_DAYS:
            continue  # the date a late reply commits to
        elif when not in due_dates:
            listed = ", ".join(sorted(d.isoformat() for d in due_dates)) or "none stored"
            flags.append(_flag("date_not_due", f"“{shown}” is not one of the case's due dates ({listed})."))

    events = list(case.events.filter(event_type__in=["case.transitioned", "case.assigned", "notice.sent"])
                  .values_list("event_type", "payload__transition"))
    for match in _CLAIM.finditer(text):
        verb = re.sub(r"\s+", " ", match.group(1).lower())
        shows = _CLAIM_EVIDENCE.get(verb, ())
        if not any((event_type, transition) in events if transition else any(e == event_type for e, _t in events)
                   for event_type, transition in shows):
            flags.append(_flag("unrecorded_action", f"“{match.group(0).strip()}”: no recorded event on the case "
                                                    f"shows this was done."))

    for reference in sorted(set(_REFERENCE.findall(ours))):
        if reference != case.reference:
            flags.append(_flag("wrong_reference", f"It names {reference}; this case is {case.reference}."))
    if case.complainant_email and recipient.strip().lower() != case.complainant_email.strip().lower():
        flags.append(_flag("wrong_recipient", f"It goes to {recipient}; the complainant is {case.complainant_email}."))
    others = (Case.objects.filter(tenant_id=case.tenant_id).exclude(pk=case.pk)
              .values_list("company", "product", "issue").distinct()[:2000])
    lower = ours.lower()
    for own in sorted({case.company, case.product, case.sub_product, case.issue, case.sub_issue} - {""}, key=len,
                      reverse=True):
        lower = lower.replace(own.lower(), " ")  # the case's own names ("Nationstar Mortgage") are right
    companies, products, issues = (sorted({row[i] for row in others if row[i]}) for i in range(3))
    flags += _vocabulary_flags(lower, value=case.company, others=companies, code="wrong_company", what="company")
    flags += _vocabulary_flags(lower, value=case.product, others=products, code="wrong_product", what="product")
    flags += _vocabulary_flags(lower, value=case.issue, others=issues, code="wrong_issue", what="issue")

    statement = request_statement(consumer_request)
    if statement and not request_addressed(statement, text):
        flags.append(_flag("request_not_addressed", f"The consumer asked: “{statement[:300]}” — the notice does "
                                                    f"not address it."))

    flags += _wording_flags(text, case)
    for match in _INSTRUCTION_LIKE.finditer(text):
        flags.append(_flag("instruction_like", f"“{match.group(0)}” reads as an instruction or a claim of "
                                               f"authority; evidence and messages never grant anything."))
    carried = _unquoted_evidence(text, evidence_texts)
    if carried:
        flags.append(_flag("unquoted_evidence", f"Evidence text is restated without quotation marks (“{carried} …”)."
                                                f" Quote it, or say it in the notice's own words."))
    return flags


def past_date_flags(flags: list[dict]) -> list[dict]:
    return [f for f in flags if f["code"] == "past_date"]
