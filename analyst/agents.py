"""The case-analysis specialists of the offline analyst. Each takes the structured context
(analyst/context.py documents its keys) and returns a dict shaped like its output schema;
the provider then validates it through the schema exactly as it would a real model's JSON."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from agents.citations import (
    code_with_words,
    code_words,
    dispute_in_words,
    evidence_quote,
    signal_words,
    signals_in_words,
)
from agents.signals import FLOORS, LEVELS, POINTS, Signal, detect_signals, raise_to, score
from agents.text import date_mentions, money_amounts, shorten, split_sentences
from analyst.classifier import get_classifier
from analyst.context import (
    EvidenceText,
    as_int,
    case_of,
    evidence_of,
    parse_date,
    prior_of,
    today_of,
)
from analyst.notice_drafter import asked_for, notice_drafter
from analyst.triage import consumer_request, min_confidence, requested_remedy, triage
from cases.models import SETTLED_STATUSES, TRANSITION_LABELS, CaseStatus
from cases.notice_checker import request_statement
from cases.policy import NOTICE_DUE_FROM_STATUSES, RULES

# --- triage (analyst/triage.py) and the notice drafter (analyst/notice_drafter.py), re-exported here,
# where the AGENTS registry looks ----------------------------------------------------------------
__all__ = ["adjudicator", "consumer_request", "evidence_analyst", "min_confidence", "notice_drafter", "policy_checker",
           "reflect", "requested_remedy", "risk_assessor", "triage"]


# --- evidence analyst -----------------------------------------------------------------------
MAX_KEY_POINTS = 5
_TOKEN = re.compile(r"[a-z][a-z']+")
_SALIENT = re.compile(r"\b(?:refund|fraud|identity|foreclos\w*|garnish\w*|dispute\w*|report\w*|payment\w*"
                      r"|forbearance|forgiveness|balance|interest|late fee\w*|collection\w*|credit score)\b",
                      re.IGNORECASE)


def _sentence_score(sentence: str, idf: dict[str, float], index: int) -> float:
    tokens = _TOKEN.findall(sentence.lower())
    if len(tokens) < 6:
        return 0.0  # headers ("Acct#: XXXX") and fragments say little
    unique = set(tokens)
    weight = sum(idf.get(token, 0.0) for token in unique) / math.sqrt(len(tokens))
    weight += 1.5 if money_amounts(sentence) else 0.0
    weight += 0.5 if date_mentions(sentence) else 0.0
    weight += 0.75 * min(len(_SALIENT.findall(sentence)), 2)
    weight += 0.75 if index == 0 else 0.0
    return weight


def evidence_analyst(context: dict) -> dict:
    evidence = evidence_of(context)
    notes = [item for item in evidence if item.set_aside]
    if not any(item.text for item in evidence):
        summary = "No readable evidence has been added to this case yet; nothing to summarise."
        return {"summary": _with_notes(summary, notes), "key_points": [],
                "evidence_refs": [item.id for item in evidence if item.id is not None]}
    idf = get_classifier().idf()
    ranked_per_item = []
    for order, item in enumerate(evidence):
        scored = [(_sentence_score(sentence, idf, index), order, index, sentence)
                  for index, sentence in enumerate(split_sentences(item.text))]
        scored = [entry for entry in scored if entry[0] > 0 and item.id is not None]
        ranked_per_item.append(sorted(scored, key=lambda e: (-e[0], e[2])))
    # Every item's best sentence first (so no document is ignored), then the best of the rest.
    chosen = [ranked[0] for ranked in ranked_per_item if ranked][:MAX_KEY_POINTS]
    rest = sorted((entry for ranked in ranked_per_item for entry in ranked[1:]), key=lambda e: (-e[0], e[1], e[2]))
    chosen += rest[: max(0, MAX_KEY_POINTS - len(chosen))]
    chosen.sort(key=lambda e: (e[1], e[2]))
    key_points = [{"text": shorten(sentence, 400), "evidence_id": evidence[order].id}
                  for _, order, _, sentence in chosen]
    described = "; ".join(
        f"E{item.id} “{shorten(item.title, 80) or 'untitled'}” ({len(item.text.split())} words)"
        for item in evidence if item.id is not None)
    body = " ".join(shorten(point["text"], 300) for point in key_points)
    summary = f"{len(evidence)} evidence item(s) reviewed: {described}. Key facts: {body}"
    return {"summary": _with_notes(shorten(summary, 3400), notes), "key_points": key_points,
            "evidence_refs": sorted({item.id for item in evidence if item.id is not None})}


def _with_notes(summary: str, notes: list[EvidenceText]) -> str:
    if not notes:
        return summary
    where = ", ".join(f"E{item.id}" for item in notes)
    count = sum(len(item.set_aside) for item in notes)
    return (f"{summary} Note: {where} contains {count} sentence(s) addressed to the assistant (instructions); "
            "they were treated as untrusted data and ignored.")


# --- risk assessor --------------------------------------------------------------------------
def read_signals(case: dict, evidence: list[EvidenceText]) -> list[Signal]:
    """The rules' signals (agents.signals), then those only the sentence reader finds
    (analyst.signal_reader), one per code in the scoring table's order: a rule's finding, which a
    supervisor can check by hand, is cited when both see a code."""
    by_code = {signal.code: signal for signal in
               detect_signals(case, [{"id": item.id, "text": item.text} for item in evidence])}
    reader = get_classifier().signal_reader
    for item in evidence:
        for signal in reader.signals(item.id, item.text or ""):
            by_code.setdefault(signal.code, signal)
    return [by_code[code] for code in POINTS if code in by_code]


def risk_assessor(context: dict) -> dict:
    case = case_of(context)
    evidence = evidence_of(context)
    signals = read_signals(case, evidence)
    level, _points, explanation = score(signals)
    # What a person reads first: the level and what it rests on, in words, with one quotation;
    # the scoring table's codes and points follow in a detail paragraph, each code spelled out.
    words = [signal_words(signal.as_dict()) for signal in signals]
    quoted = evidence_quote([signal.as_dict() for signal in signals])
    if words:
        first = f"Risk {level} because of: {signals_in_words(words)}."
        first += f" {quoted}" if quoted else ""
    elif evidence:
        first = f"Risk {level}: no risk signal was found in the evidence."
    else:
        first = f"Risk {level}: no evidence was available, so only the case record was assessed."
    details = [f"{signal.code} +{signal.points} ({code_words(signal.code)}; "
               f"{'E' + str(signal.evidence_id) if signal.evidence_id is not None else 'case record'})"
               for signal in signals]
    table = re.sub(r"\b(\d+) point\(s\) → ", lambda m: f"{m[1]} point{'' if m[1] == '1' else 's'}, so ",
                   explanation).replace(" requires at least ", " sets a minimum of ")
    detail = f"Details: scoring table: {'; '.join(details) + '. ' if details else ''}{table}."
    cited = sorted({s.evidence_id for s in signals if s.evidence_id is not None})
    return {
        "risk_level": level,
        "rationale": shorten(first, 1500) + "\n\n" + shorten(detail, 2400),
        "signals": [signal.as_dict() for signal in signals],
        "evidence_refs": cited or [item.id for item in evidence if item.id is not None],
        "confidence": 0.85 if any(item.text for item in evidence) else 0.4,
    }


# --- policy checker -------------------------------------------------------------------------
_DEAD_NOTICE_STATUSES = {"rejected", "withdrawn"}
SIGNAL_RULES = ("SCRA", "OLDER-AM", "FRAUD-ID", "MONEY-LOSS")


def _policy_rules(context: dict) -> list[dict]:
    rules = context.get("policy_rules")
    if rules:
        return [rule for rule in rules if isinstance(rule, dict) and rule.get("code")]
    return [{"code": rule.code, "title": rule.title, "description": rule.description,
             "deadline_days": rule.deadline.days if rule.deadline else None} for rule in RULES]


def _deadline_days(rule: dict) -> int | None:
    for key in ("deadline_days", "deadline"):
        value = rule.get(key)
        if isinstance(value, int | float):
            return int(value)
        if isinstance(value, str) and (match := re.match(r"^(\d+)", value)):
            return int(match.group(1))
    return None


def _response_notices(context: dict) -> list[dict]:
    notices = [n for n in context.get("notices") or [] if isinstance(n, dict)]
    return [n for n in notices if str(n.get("kind") or "response") == "response"
            and str(n.get("status") or "") not in _DEAD_NOTICE_STATUSES]


def _signals_for_policy(context: dict) -> dict[str, dict]:
    risk = prior_of(context, "risk_assessor") or risk_assessor(context)
    return {signal.get("code"): signal for signal in risk.get("signals") or [] if isinstance(signal, dict)}


def _days_phrase(deadline, today) -> str:
    days = (deadline - today).days
    if days > 0:
        return f"{days} day(s) left"
    if days == 0:
        return "due today"
    return f"overdue by {-days} day(s)"


def policy_checker(context: dict) -> dict:
    case = case_of(context)
    status = str(case.get("status") or "")
    received = parse_date(case.get("received_at"))
    today = today_of(context)
    signals = _signals_for_policy(context)
    notices = _response_notices(context)
    sent = [n for n in notices if n.get("status") == "sent"]
    applications = []
    for rule in _policy_rules(context):
        code = str(rule["code"])
        days = _deadline_days(rule)
        deadline = received + timedelta(days=days) if received and days is not None else None
        if code == "ACK-15":
            if sent:
                applies, reason = False, "Acknowledged: a response notice was sent."
            elif deadline:
                applies, reason = True, (f"Received {received.isoformat()}; a response notice is due by "
                                         f"{deadline.isoformat()} ({_days_phrase(deadline, today)}).")
            else:
                applies, reason = True, "Received date unknown: record it so the 15-day deadline can be computed."
        elif code == "CLOSE-60":
            if status in SETTLED_STATUSES:
                applies, reason = False, f"The case is already {_status_words(status)}."
            elif deadline:
                applies, reason = True, (f"Received {received.isoformat()}; a decision is due by "
                                         f"{deadline.isoformat()} ({_days_phrase(deadline, today)}).")
            else:
                applies, reason = True, "Received date unknown: record it so the 60-day deadline can be computed."
        elif code in SIGNAL_RULES:
            signal = signals.get(code)
            applies = signal is not None
            if signal is None:
                reason = f"No {code} signal in the risk assessment."
            else:
                where = f"E{signal['evidence_id']}" if signal.get("evidence_id") is not None else "the case record"
                reason = f"{signal.get('description', code)} (from {where})."
        else:
            applies, reason = False, f"The offline analyst has no check for rule {code}; an analyst must assess it."
        applications.append({"code": code, "applies": applies, "reason": shorten(reason, 1000),
                             "deadline": deadline.isoformat() if deadline and code in ("ACK-15", "CLOSE-60") else None})
    if status not in NOTICE_DUE_FROM_STATUSES:
        notice_due, notice_reason = False, f"No notice is due while the case is {status or 'in an unknown status'}."
    elif notices:
        first = notices[0]
        notice_due, notice_reason = False, (f"A response notice already exists "
                                            f"({str(first.get('status') or '').replace('_', ' ')}).")
    else:
        ack = next((a for a in applications if a["code"] == "ACK-15"), None)
        by = f" by {ack['deadline']}" if ack and ack["deadline"] else ""
        notice_due, notice_reason = True, (f"The case is {_status_words(status)} and no response notice has been "
                                           f"drafted or sent; one is due{by} (acknowledge within 15 days).")
    return {"rules": applications, "notice_due": notice_due, "notice_reason": notice_reason}


# --- adjudicator ----------------------------------------------------------------------------
def _status_words(status: str) -> str:
    return dict(CaseStatus.choices).get(status, status.replace("_", " ")).lower()


NEXT_TRANSITION = {"new": "triage", "triaged": "start_review", "ready_for_decision": "decide", "decided": "close"}
# Why that step, in the words the proposal's first sentence uses ("Recommended next step: … — why.").
NEXT_STEP_WHY = {"new": "the complaint is new and has not been triaged yet",
                 "triaged": "the complaint is triaged and nothing stands in the way of its review",
                 "ready_for_decision": "the review is complete and the case is ready for a decision",
                 "decided": "the decision is made, so the case can be closed"}
MIN_WORDS_SUFFICIENT = 40
_UNRESOLVED = "Unresolved"


def _evidence_sufficient(evidence: list[EvidenceText], policy_codes: set[str]) -> tuple[bool, str]:
    substantive = [item for item in evidence if len(item.text.split()) >= MIN_WORDS_SUFFICIENT]
    if not substantive:
        return False, f"no evidence item has at least {MIN_WORDS_SUFFICIENT} words of readable text"
    if "FRAUD-ID" in policy_codes and len(evidence) < 2:
        return False, "an identity-theft allegation needs evidence of the disputed accounts beyond the complaint"
    return True, f"{len(substantive)} substantive evidence item(s)"


def adjudicator(context: dict) -> dict:
    case = case_of(context)
    evidence = evidence_of(context)
    triage_out = prior_of(context, "triage")
    risk = prior_of(context, "risk_assessor") or risk_assessor(context)
    policy = prior_of(context, "policy_checker") or policy_checker(context)
    applied = {rule.get("code") for rule in policy.get("rules") or [] if rule.get("applies")}
    level, disputes = _adjudicated_risk(risk, applied)
    recorded_product = str(case.get("product") or "").strip()
    disputes += _classification_disputes(triage_out, recorded_product)
    transition, why, more = _adjudicated_transition(context, case, evidence, applied, level, triage_out)
    disputes += more

    confidences = [float(out["confidence"]) for out in (triage_out, risk)
                   if out and isinstance(out.get("confidence"), int | float)]
    confidence = sum(confidences) / len(confidences) if confidences else 0.5
    unresolved = [d for d in disputes if d["resolution"].startswith(_UNRESOLVED)]
    confidence = max(0.0, min(1.0, confidence - 0.15 * len(unresolved)))

    product = (triage_out or {}).get("product") or recorded_product or "unclassified product"
    issue = (triage_out or {}).get("issue") or case.get("issue") or "unclassified issue"
    respondent = str(case.get("company") or "an unrecorded respondent").rstrip(". ")
    classified = (f"{product} / {issue} (an analyst should confirm this)" if (triage_out or {}).get("needs_analyst")
                  else f"{product} / {issue}")
    summary = _adjudication_text(
        step=TRANSITION_LABELS.get(transition, transition).lower() if transition else None, why=why,
        classified=classified, respondent=respondent, request=(triage_out or {}).get("consumer_request"),
        level=level, risk=risk, policy=policy, applied=applied, disputes=disputes)
    return {"summary": summary[:4000], "risk_level": level, "recommended_transition": transition,
            "disputes": disputes, "confidence": round(confidence, 4)}


def _adjudicated_risk(risk: dict, applied: set) -> tuple[str, list[dict]]:
    """The risk level after the policy minimums and the scoring table, with a dispute for each raise."""
    disputes = []
    assessed = risk.get("risk_level") if risk.get("risk_level") in LEVELS else "low"
    minimum, because = "low", []
    for code in sorted(applied & set(FLOORS)):
        if LEVELS.index(FLOORS[code]) > LEVELS.index("low"):
            because.append(code)
            minimum = raise_to(minimum, FLOORS[code])
    level = raise_to(assessed, minimum)
    if level != assessed:
        disputes.append({
            "topic": "risk level",
            "positions": [f"risk_assessor: {assessed}",
                          f"policy_checker: {', '.join(because)} require(s) at least {minimum}"],
            "resolution": f"Raised to {level}: policy minimums prevail over the assessed level.",
        })

    # The risk assessor's stated level against the scoring table applied to its own signals (a real
    # model can state one and list the other).
    listed = [Signal(str(sig.get("code")), str(sig.get("description") or ""), None)
              for sig in risk.get("signals") or [] if isinstance(sig, dict) and sig.get("code")]
    tabled, _, table_says = score(listed)
    if listed and tabled != assessed and LEVELS.index(tabled) > LEVELS.index(level):
        disputes.append({
            "topic": "risk level",
            "positions": [f"risk_assessor: {assessed}", f"scoring table on its own signals: {table_says}"],
            "resolution": f"Raised to {tabled}: the published scoring table prevails over the stated level.",
        })
        level = tabled

    return level, disputes


def _classification_disputes(triage_out: dict | None, recorded_product: str) -> list[dict]:
    """Disputes about triage's confidence and the product the case records."""
    disputes = []
    if triage_out and triage_out.get("needs_analyst"):
        confidence_value = float(triage_out.get("confidence") or 0)
        disputes.append({
            "topic": "triage confidence",
            "positions": [f"triage: best guess {triage_out.get('product')} / {triage_out.get('issue')} "
                          f"(confidence {confidence_value:.2f})",
                          f"threshold: product and issue need confidence ≥ {min_confidence():.2f}"],
            "resolution": ("Needs an analyst: product and issue are left out of notices until an analyst "
                           "confirms them."),
        })
    if triage_out and recorded_product and triage_out.get("product") \
            and triage_out["product"].strip().lower() != recorded_product.lower():
        disputes.append({
            "topic": "product",
            "positions": [f"triage: {triage_out['product']}", f"case record: {recorded_product}"],
            "resolution": (f"Triage reads the narrative as {triage_out['product']} with confidence "
                           f"{float(triage_out.get('confidence') or 0):.2f}; an analyst should correct the case record."),
        })
    elif triage_out and recorded_product and triage_out.get("narrative_product"):
        disputes.append({
            "topic": "product",
            "positions": [f"case record: {recorded_product}",
                          f"narrative: reads as {triage_out['narrative_product']}"],
            "resolution": (f"Case record kept (the consumer chose it); an analyst should confirm whether the "
                           f"product is {triage_out['narrative_product']}."),
        })

    if triage_out and triage_out.get("company_product") and triage_out.get("doubt"):
        disputes.append({
            "topic": "product: narrative and company prior",
            "positions": [f"narrative: reads like {triage_out.get('narrative_reading')}",
                          f"company prior: usually {triage_out['company_product']}"],
            "resolution": (f"{triage_out['doubt']} Triage answers {triage_out.get('product')} "
                           f"(confidence {float(triage_out.get('confidence') or 0):.2f})."),
        })

    return disputes


def _adjudicated_transition(context: dict, case: dict, evidence, applied: set, level: str,
                            triage_out: dict | None) -> tuple[str | None, str, list[dict]]:
    """The next transition to propose (or None), why, and the disputes that changed it."""
    disputes = []
    status = str(case.get("status") or "")
    sufficient, sufficiency = _evidence_sufficient(evidence, applied)
    if status == "under_review":
        transition = "mark_ready" if sufficient else "request_evidence"
        why = f"evidence is {'sufficient' if sufficient else 'insufficient'} ({sufficiency})"
        if sufficient and str(case.get("risk_level") or "unassessed") == "unassessed":
            why += (f"; the risk level ({level}) must be approved first, as marking ready for decision "
                    "needs an assessed risk")
    elif status == "waiting_for_evidence":
        transition = "receive_evidence" if sufficient else None
        why = ("the requested evidence appears to be in" if sufficient
               else f"still waiting: {sufficiency}")
    else:
        transition = NEXT_TRANSITION.get(status)
        why = (NEXT_STEP_WHY[status] if transition
               else f"no further step from the status {_status_words(status) or 'unknown'}")
    if status == "under_review" and not sufficient:
        disputes.append({
            "topic": "evidence",
            "positions": ["lifecycle: marking the case ready for decision is the next step",
                          f"evidence check: insufficient ({sufficiency})"],
            "resolution": "Requesting evidence is recommended instead of marking the case ready for decision.",
        })
    if transition == "triage" and triage_out and triage_out.get("needs_analyst"):
        disputes.append({
            "topic": "transition",
            "positions": ["lifecycle: triage is the next step",
                          "triage: product and issue are not known with enough confidence"],
            "resolution": "No transition proposed: an analyst classifies the complaint, then triages it.",
        })
        transition, why = None, "an analyst must confirm product and issue before the case is triaged"
    if transition == "close" and any(str(n.get("status")) in {"pending_approval", "approved", "sending", "failed"}
                                     for n in context.get("notices") or [] if isinstance(n, dict)):
        transition, why = None, "a notice is still in flight; close once it is sent or withdrawn"

    return transition, why, disputes


def _adjudication_text(*, step, why, classified, respondent, request, level, risk, policy, applied,
                       disputes) -> str:
    """The rationale a supervisor reads on the proposal's card: a first paragraph in sentences (what
    is proposed, why, on which evidence, with a quotation; no codes, stored values or ids), then a
    "Details" paragraph where each rule and signal code is spelled out."""
    signals = [s for s in risk.get("signals") or [] if isinstance(s, dict) and s.get("code")]
    words = list(dict.fromkeys(signal_words(s) for s in signals))
    quote = next((str(s["quote"]) for s in signals if s.get("quote")), "")
    # With no signal to quote, the consumer's request is quoted — beside the request it shows, not
    # after "no risk signal was found", where it would read as the evidence for that.
    asked_in_words = ""
    if not quote and isinstance(request, dict) and request.get("kind") not in (None, "none"):
        asked_in_words = str(request.get("quote") or "")
    asks = request_statement(request) if isinstance(request, dict) and request.get("kind") != "other" else ""
    first = [f"{'Recommended next step: ' + step if step else 'No next step recommended'} — {why}.",
             f"Classified as {classified}, against {respondent}."]
    if asks:
        first.append(f"The consumer asks for {asked_for(request.get('kind'), asks)}.".replace("..", "."))
    if asked_in_words:
        first.append(f"{'In their words' if asks else 'The consumer writes'}: “{asked_in_words}”")
    first.append(f"Risk {level}" + (f" because of: {signals_in_words(words)}." if words else ": no risk signal was found."))
    if quote:
        first.append(evidence_quote([s for s in signals if isinstance(s, dict)]))
    topics = list(dict.fromkeys(str(d.get("topic") or "").split(":")[0].strip() for d in disputes))
    first.append(f"{'A notice to the consumer is due' if policy.get('notice_due') else 'No notice is due'}; "
                 + (f"the agents disagree on the {' and the '.join(t for t in topics if t) or 'analysis'} (see the details)."
                    if disputes else "no disputes between the agents."))
    rules = sorted(code for code in applied if code)
    detail = ["Details:", ("Policy rules that apply: " + ", ".join(code_with_words(c) for c in rules) + "."
                           if rules else "No policy rule applies.")]
    detail += [dispute_in_words(d) for d in disputes]
    return shorten(" ".join(first), 1800).replace("\n", " ") + "\n\n" + shorten(" ".join(detail), 2100)


# --- reflect --------------------------------------------------------------------------------
_TOPIC_NODES = (("product", ["triage"]), ("issue", ["triage"]), ("risk", ["risk_assessor", "policy_checker"]),
                ("evidence", ["evidence_analyst"]), ("polic", ["policy_checker"]))


def _gaps(context: dict) -> list[tuple[str, list[str]]]:
    """Gaps a second look can fill: (why, agents to revisit)."""
    gaps = []
    unread = [item for item in evidence_of(context) if item.id is not None and _UNREAD.match(item.text or "")]
    if unread:
        gaps.append((f"evidence {', '.join(f'E{i.id}' for i in unread)} has no readable text yet",
                     ["evidence_analyst", "risk_assessor"]))
    truncated = [raw for raw in context.get("evidence") or [] if isinstance(raw, dict) and raw.get("truncated")]
    if truncated:
        gaps.append((f"evidence {', '.join('E' + str(r.get('id')) for r in truncated)} was only partly read",
                     ["evidence_analyst", "risk_assessor"]))
    risk = prior_of(context, "risk_assessor") or {}
    unquoted = [str(sig.get("code")) for sig in risk.get("signals") or []
                if isinstance(sig, dict) and sig.get("evidence_id") is not None and not str(sig.get("quote") or "")]
    if unquoted:
        gaps.append((f"signal(s) {', '.join(unquoted)} cite evidence without a verified quote", ["risk_assessor"]))
    triage_out = prior_of(context, "triage") or {}
    request = triage_out.get("consumer_request") or {}
    if isinstance(request, dict) and request.get("evidence_id") is not None and not request.get("quote"):
        gaps.append(("the consumer's request cites evidence without a verified quote", ["triage"]))
    return gaps


_UNREAD = re.compile(r"^\s*\[[\w.+/-]+ file [^\]]*\]\s*$")


def reflect(context: dict) -> dict:
    """Re-plan only for a gap a second look can fill: evidence not read (a file without text, an
    excerpt cut short), a signal or the consumer's request citing evidence without a verified
    quote, or an unresolved dispute. A low triage confidence is not such a gap — running the
    same classifier again would answer the same — it is left to an analyst (the adjudicator's
    "triage confidence" dispute)."""
    if int(as_int(context.get("replans_done")) or 0) >= 1:
        return {"replan": False, "reason": "Already re-planned once; the findings stand as they are.", "revisit": []}
    adjudication = prior_of(context, "adjudicator") or adjudicator(context)
    unresolved = [d for d in adjudication.get("disputes") or []
                  if not str(d.get("resolution") or "").strip() or str(d.get("resolution")).startswith(_UNRESOLVED)]
    revisit: list[str] = []
    reasons = []
    for dispute in unresolved:
        topic = str(dispute.get("topic") or "").lower()
        nodes = next((nodes for key, nodes in _TOPIC_NODES if key in topic), ["evidence_analyst"])
        revisit += [node for node in nodes if node not in revisit]
        reasons.append(f"dispute on {topic or 'an unnamed topic'} is unresolved")
    for why, nodes in _gaps(context):
        revisit += [node for node in nodes if node not in revisit]
        reasons.append(why)
    if not reasons:
        return {"replan": False, "reason": "No gap a second look could fill (all evidence read, every cited signal "
                                           "quoted, no unresolved dispute); no re-plan.", "revisit": []}
    revisit.append("adjudicator")
    return {"replan": True, "reason": shorten("Re-plan: " + "; ".join(reasons) + ".", 1000), "revisit": revisit}
