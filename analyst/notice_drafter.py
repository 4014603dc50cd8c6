"""The notice drafter of the offline analyst: an acknowledgement in the team's words, grounded in what
the case records (re-exported by analyst/agents.py, where the AGENTS registry looks)."""

from __future__ import annotations

import re

from agents.graphs.guards import safe_to_quote
from agents.signals import detect_signals
from agents.text import shorten
from analyst.context import (
    case_of,
    evidence_of,
    parse_date,
    prior_of,
    today_of,
)
from analyst.triage import REQUEST_KINDS
from cases.deadlines import add_days
from cases.models import SETTLED_STATUSES
from cases.notice_checker import request_statement

# --- notice drafter -------------------------------------------------------------------------
# The drafter writes only what the case records: the case's own product / issue / company /
# reference, the consumer's request restated in our words (or, for a request of no known kind, the
# consumer's exact sentence in quotation marks when it is safe to quote), what happens next and by
# when (a stored due date that is still ahead, in words; when the response is late, an apology and
# the date the graph commits to), and no claim of an action, contact or finding the case's events
# do not show. cases/notice_checker.py checks every draft.
_RESTATED = {
    "stop_contact": "the calls and collection contact to stop",
}


def asked_for(kind, statement: str) -> str:
    """What the consumer asks for, to follow "asking for" or "asks for": triage's statement in lower
    case, or its restatement where the statement is an imperative ("Stop the calls and collection
    contact" → "the calls and collection contact to stop")."""
    return _RESTATED.get(kind) or statement[0].lower() + statement[1:]


def in_words(day) -> str:
    """17 March 2026."""
    return f"{day.day} {day:%B %Y}"


def _next_dates(context: dict) -> tuple[object | None, object | None]:
    """(response due, final response due): the stored due dates still ahead, else None."""
    due = context.get("due_dates") or {}
    today = today_of(context)
    response = parse_date(due.get("response_due"))
    final = parse_date(due.get("close_due"))
    return (response if response and response >= today else None), (final if final and final >= today else None)


def commitment_date(context: dict):
    """The date a late reply commits to: the one the graph gives, else five working days ahead."""
    return parse_date(context.get("commit_date")) or add_days(today_of(context), 5, business=True)


def _request_sentence(context: dict) -> str:
    request = context.get("consumer_request_detail") or {}
    statement = request_statement(request) if isinstance(request, dict) and request else \
        request_statement(context.get("consumer_request"))
    kind = request.get("kind") if isinstance(request, dict) else None
    if statement and not kind:
        # Only the statement was given: restated when it is one of triage's own plain-words kinds.
        kind = next((name for name, _pattern, words in REQUEST_KINDS
                     if statement == words or (name == "refund" and statement.startswith("A refund of $"))), "other")
    if kind == "other":
        quote = str(request.get("quote") or "") if isinstance(request, dict) else ""
        return f"In your complaint you wrote: “{' '.join(quote.split())}”" if safe_to_quote(quote) else ""
    if not statement:
        return ""
    wanted = asked_for(kind, statement)
    return f"We understand that you are asking for {wanted.rstrip('.')}."


def _told_codes(context: dict, case: dict) -> set:
    """The risk signals the notice may tell the consumer about: those the risk assessor raised AND
    the rules find in the evidence or the case record. A signal only the sentence reader found is
    a supervisor's lead, not something to tell the consumer they said."""
    risk = prior_of(context, "risk_assessor") or {}
    raised = {s.get("code") for s in risk.get("signals") or [] if isinstance(s, dict)}
    evidence = [{"id": item.id, "text": item.text} for item in evidence_of(context)]
    return raised & {signal.code for signal in detect_signals(case, evidence)}


def _care_sentences(codes: set) -> list[str]:
    care = []
    if "FRAUD-ID" in codes:
        care.append("Because you tell us that accounts or debts may have been opened or used in your name by "
                    "someone else, we will give your complaint priority.")
    if "SCRA" in codes:
        care.append("Because your complaint concerns a servicemember or veteran, the protections that apply to "
                    "servicemembers will be part of our review.")
    if "OLDER-AM" in codes:
        care.append("We will handle your complaint under our procedure for older consumers.")
    if "URGENCY" in codes:
        care.append("You describe a situation with a deadline of its own; if something must happen by a "
                    "particular date, please tell us at once.")
    return care


def _when_sentences(context: dict) -> list[str]:
    if context.get("response_late"):
        return ["We are sorry that we have not replied within the time we aim to keep.",
                f"We will send you our response by {in_words(commitment_date(context))}."]
    response, final = _next_dates(context)
    if context.get("notice_sent"):
        response = None
    if response:
        return [f"We will send you our response by {in_words(response)}."]
    if final:
        return [f"Our final response will reach you by {in_words(final)}."]
    return ["We will send you our response as soon as our review is complete."]


def notice_drafter(context: dict) -> dict:
    case = case_of(context)
    reference = case.get("reference") or "your complaint"
    triage_out = prior_of(context, "triage") or {}
    # The case's recorded fields first: the notice names what the case records. Below the triage
    # confidence threshold the agents' own labels are not told to the consumer.
    unsure = bool(triage_out.get("needs_analyst"))
    issue = str(case.get("issue") or (None if unsure else triage_out.get("issue")) or "the matter you raised").strip()
    product = str(case.get("product") or (None if unsure else triage_out.get("product")) or "").strip()
    respondent = str(case.get("company") or "").strip().rstrip(".")
    final = str(case.get("status") or "") in SETTLED_STATUSES and str(case.get("resolution") or "").strip()
    codes = _told_codes(context, case)

    name = str(case.get("complainant_name") or "").strip()
    greeting = f"Dear {name}," if name and not re.search(r"redact|xxxx|\[", name, re.IGNORECASE) else "Dear Sir or Madam,"
    about = f"about {issue[0].lower() + issue[1:]}" + (f" ({product})" if product else "")
    concerning = f" concerning {respondent}" if respondent else ""
    received = parse_date(case.get("received_at"))
    paragraphs = [greeting]
    if final:
        subject = f"Your complaint {reference}: our response"
        paragraphs += [
            f"We have completed our review of your complaint {about}{concerning}, reference {reference}.",
            f"Our decision: {shorten(str(case['resolution']), 1500)}",
            f"If you disagree with this outcome, please reply to this email quoting {reference} and tell us why.",
        ]
    else:
        subject = f"Your complaint {reference}: we have received it"
        paragraphs.append(
            f"Thank you for your complaint {about}{concerning}. "
            + (f"We received it on {in_words(received)} and" if received else "We")
            + f" have registered it under reference {reference}.")
        request = _request_sentence(context)
        care = _care_sentences(codes)
        if request or care:
            paragraphs.append(" ".join([request, *care]).strip())
        paragraphs.append("What happens next: we will review your complaint and the information in it. "
                          + " ".join(_when_sentences(context)))
        paragraphs.append(f"If you have documents that support your complaint (statements, letters, records of "
                          f"calls), or if anything in this letter is not right, please reply to this email quoting "
                          f"reference {reference}.")
    paragraphs += ["Yours sincerely,\nThe Consumer Complaints Team"]
    return {"subject": shorten(subject, 300), "body": "\n\n".join(p.strip() for p in paragraphs)}
