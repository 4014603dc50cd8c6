"""Triage of the offline analyst: product, sub-product and issue within the CFPB taxonomy (with a
calibrated confidence, and "needs an analyst" below ARBITER_TRIAGE_MIN_CONFIDENCE), the
respondent, and what the consumer asks for (`consumer_request`, with its exact quote).

Triage doubts itself: the narrative's own reading and the company prior (what complaints against
the respondent are usually about) are kept apart; when their top products differ, the finding says
so in words (`doubt`) and the adjudicator raises a dispute, whatever the combined confidence."""

from __future__ import annotations

import re

from agents import taxonomy
from agents.schemas import UNCLASSIFIED
from agents.signals import quote_of
from agents.text import money_amounts, set_aside_instructions, shorten, split_sentences
from analyst.classifier import get_classifier
from analyst.context import EvidenceText, case_of, evidence_of, parse_date

# --- triage ---------------------------------------------------------------------------------
# A recorded product is kept unless the narrative reads, with at least this probability, as a
# different product that the recorded one scarcely explains (a likely mis-filed complaint).
OVERRIDE_PROBABILITY = 0.85
RECORDED_LABEL_CEILING = 0.05
# A field taken from the case record is trusted at least this much (the consumer chose it).
RECORDED_CONFIDENCE = 0.8

_REMEDY = re.compile(
    r"\b(?:refund\w*|reimburs\w*|remov\w*|delet\w*|correct\w*|fix\w*|want\w*|request\w*|asking|ask (?:that|for|you)"
    r"|would like|forgiv\w*|discharg\w*|cancel\w*|waiv\w*|compensat\w*|return (?:my|the)|credit (?:back|my)"
    r"|stop (?:the|all|calling|collect\w*|report\w*)|reduc\w*|lower my|adjust\w*|resolve\w*|demand\w*)\b",
    re.IGNORECASE)
_FIRST_PERSON_ASK = re.compile(
    r"\b(?:i|we)\s+(?:\w+\s+){0,2}(?:want|would like|request|am requesting|are requesting|ask|am asking|need|demand"
    r"|expect|hope)\b|\bplease\b"
    r"|\b(?:should|must|needs? to) be (?:removed|corrected|deleted|refunded|discharged|forgiven|fixed|updated"
    r"|reversed|credited|blocked|suppressed|returned|cancell?ed|waived|adjusted)\b", re.IGNORECASE)


_REMEDY_NOUN = re.compile(r"\b(?:refund|reimbursement|discharge|forgiveness|removal|deletion|correction|"
                          r"compensation|cancellation|waiver|reversal|chargeback)s?\b", re.IGNORECASE)


def _classifier_text(case: dict, evidence: list[EvidenceText]) -> str:
    title, _ = set_aside_instructions(str(case.get("title") or ""))
    return " ".join([title] + [item.text for item in evidence]).strip()


def requested_remedy(evidence: list[EvidenceText]) -> str:
    """The sentence(s) in which the complainant asks for something: first-person requests ("I
    would like these items removed", "please refund") first; a sentence with only remedy words
    qualifies when it has at least two of them."""
    candidates = _request_candidates(evidence)
    if not candidates:
        # No explicit request: the first sentence naming a remedy ("I have waited a year for a
        # refund") shows what is wanted, and is labelled as implied.
        for item in evidence:
            for sentence in split_sentences(item.text):
                if _REMEDY_NOUN.search(sentence):
                    return shorten("Implied by the narrative: " + sentence, 1000)
        return "No specific remedy is stated in the evidence."
    best = candidates[:2]
    best.sort(key=lambda c: (c[1], c[2]))
    return shorten(" ".join(c[3] for c in best), 1000)


# --- the consumer's request -------------------------------------------------------------------
# Money owed back in words the refund pattern below and _REFUND_OWED share (the first held-out and the blind
# set): a sum to be refunded, reimbursed, credited back or returned, fees to be reversed, "due a refund",
# "owes me", money the company will not return or replace, credit it has yet to give.
_MONEY_BACK = (r"\b(?:be|been|being) (?:refunded|reimbursed|credited back)\b|\bdue (?:a |my )?refund\b"
               r"|(?<!would )\bowes? (?:me|us) (?:my|the|our|\{?\$)|\b(?:will not|won't|refus\w* to|never) (?:return|replace|give back)"
               r" (?:my|our|the|it)\b|\b(?:get|getting|want) (?:my|our) (?:over ?payments?|money|funds|payments?|deposit)"
               r" back\b|\bcredited back\b"
               r"|\b(?:account|amount)s? (?:be|to be) credited\b|\b(?:getting|get|have) (?:the |these |those |my )?(?:fees|charges)"
               r" reversed\b|\b(?:fees|charges) (?:be|to be) reversed\b"
               r"|\breinstate the (?:full )?amount\b|\b(?:yet to|never|not) (?:give|provide|given|provided) (?:me|us) (?:full )?credit\b"
               r"|\b(?:payments?|funds|money) (?:be )?returned to (?:my|our|me|us)\b|\bpayments? returned\b"
               # the second held-out set: money put back, "want back the difference", "my monies", funds not
               # released or retrieved, a deposit to be returned, a claim or credit refused, a sum kept
               r"|\bput (?:the )?money back\b|\b(?:would like|want) back\b|\bwant (?:my|our) monies\b"
               r"|\b(?:no|not) release (?:of )?(?:the |my |our )?funds\b"
               r"|\b(?:will not|won't|refus\w* to) (?:retrieve|recover|return) (?:my|our|the) (?:money|funds)\b"
               r"|\breturn (?:my|our) (?:security )?deposit\b|\b(?:will not|won't|refus\w* to) give (?:me|us) (?:any )?credit\b"
               r"|\brefus\w* to honou?r (?:my|our|the) claim\b|\bkeeping (?:my|our) \{?\$")
# (kind, pattern, statement) in order of precedence: the first kind a request sentence shows wins.
REQUEST_KINDS = (
    ("stop_contact", re.compile(r"\bstop (?:the |all |these )?(?:calls?|calling|contact\w*|harass\w*|collect\w*)"
                                r"|\bcease\b|\bdo not (?:call|contact)\b|\bleave me alone\b|\bwant (?:this|it) to stop\b"
                                r"|\bharass me at work\b", re.IGNORECASE),
     "Stop the calls and collection contact"),
    ("refund", re.compile(r"\brefund\w*|\breimburs\w*|\bmoney back\b|\breturn (?:my|the) (?:money|funds|payments?)\b"
                          r"|\brestitution\b|(?:\b(?:amount|money|funds)|\.\d\d\}?) back\b"
                          r"|\b(?:funds|money) (?:were|was|has|have)(?: not|n't| never) (?:been )?returned\b"
                          r"|\bcredit (?:back|my account)\b|\bcompensat(?!e for\b|ed for the inconvenience)\w*"
                          r"|\bfinancial remedy\b|" + _MONEY_BACK, re.IGNORECASE),
     "A refund"),
    ("discharge", re.compile(r"\bdischarg\w*|\bforgiv\w*|\bcancel\w* (?:of )?(?:my|the|this) (?:loans?|debt)\b"
                             r"|\bwaiv\w*", re.IGNORECASE),
     "Discharge or forgiveness of the debt"),
    ("removal", re.compile(r"\bremov\w*|\bdelet\w*|\bsuppress\w*|\bblock\w*|\btake (?:it|this|them) off\b",
                           re.IGNORECASE),
     "Removal of the disputed items"),
    ("correction", re.compile(r"\bcorrect\w*|\bfix\w*|\bupdat\w*|\badjust\w*|\brevers\w*|\brecalculat\w*"
                              r"|\baccurate\w*|\bapply (?:my|the) payments?\b|\bresolv\w*", re.IGNORECASE),
     "Correction of the account or record"),
    ("payment_relief", re.compile(r"\bforbearance\b|\bdeferment\b|\blower (?:my )?payments?\b|\bpayment plan\b"
                                  r"|\bincome[- ]driven\b|\bidr\b|\breduc\w*|\bafford\w*", re.IGNORECASE),
     "Relief on payments (a lower payment, forbearance or a plan)"),
    ("investigation", re.compile(r"\binvestigat\w*|\blook into\b|\breview\w*|\bverif\w*|\bvalidat\w*|\bproof\b"
                                 r"|\bexplanation\b|\bdocumentation\b", re.IGNORECASE),
     "An investigation, with proof or an explanation"),
    ("account_access", re.compile(r"\baccess (?:to )?my account\b|\bunlock\w*|\breopen\w*|\bclose my account\b",
                                  re.IGNORECASE),
     "Access to the account"),
)


# "It is crystal clear what I am asking", "that is all we want": the asking verb points back at a
# request made elsewhere; such a sentence asks for nothing by itself.
_REFERS_TO_A_REQUEST = re.compile(r"\bwhat (?:i|we) (?:am |are |was |were )?(?:asking|requesting|want|need|ask|request)"
                                  r"(?:ed|ing)?\b|\ball (?:i|we) (?:want|ask|need)\b", re.IGNORECASE)


# A refund the company gave, started or sent ("they provided a refund for the amount stolen", "refunds
# were sent out", "they were initiating an Over-payment refund request with the County") is no request
# for money back (RUBRIC.md: "a refund a company merely mentions").
_REFUND_GIVEN = re.compile(
    r"\b(?:they|it|he|she|the (?:bank|company|servicer|lender|merchant|county))\b(?: \w+){0,2} (?:provided|issued|sent|gave"
    r"|processed|approved|initiat\w*|offered)\b[^.]{0,30}\brefund"
    r"|\brefunds? (?:was|were|has been|had been|have been) (?:sent|issued|processed|provided|approved|received|paid)\b"
    r"|(?<!not )(?<!never )(?<!n't )(?<!yet to )\b(?:getting|got|received) (?:a |the |my |their )?refund\b"
    r"|\b(?:was|were|been|got) refunded\b", re.IGNORECASE)
# A refund owed and not paid is money asked back even where no sentence asks in so many words ("I have not
# received my refund", "still hasn't refunded the purchase", "the funds were not returned", "I want my $69 back").
_REFUND_OWED = re.compile(
    r"\b(?:not|never|yet to) (?:\w+ )?(?:received|gotten|got|get) (?:my|a|the|any|our) (?:\w+ )?refund"
    r"|\b(?:hasn't|has not|haven't|have not|never|not|yet to) (?:been )?refunded\b|\bcan ?not reimburse\b"
    r"|\bcouldn'?t refund\b|\brefus\w* to (?:refund|reimburse|return)\b|\bwant (?:my|the|this|our) (?:[^.]|\.\d){0,20}\bback\b"
    r"|\bget (?:this|the|my|our) (?:amount|money|funds|refund)\b|\b(?:funds|money) (?:were|was|has|have)(?: not|n't| never)"
    r" (?:been )?returned\b|\bissue (?:\w+ )?restitution\b|\bowe (?:me|us)\b[^.]{0,30}\breimburse\w*|" + _MONEY_BACK,
    re.IGNORECASE)


def _asks_for_nothing(sentence: str) -> bool:
    return bool(_REFERS_TO_A_REQUEST.search(sentence)) and not any(
        pattern.search(sentence) for _kind, pattern, _statement in REQUEST_KINDS)


def _request_candidates(evidence: list[EvidenceText]) -> list[tuple[float, int, int, str]]:
    candidates = []
    for order, item in enumerate(evidence):
        sentences = split_sentences(item.text)
        for index, sentence in enumerate(sentences):
            owed = bool(_REFUND_OWED.search(sentence)) and not _REFUND_GIVEN.search(sentence)
            hits = len(_REMEDY.findall(sentence)) + 2 * owed  # money owed back outranks a mere mention
            asks = owed or bool(_FIRST_PERSON_ASK.search(sentence))
            if not hits or (not asks and hits < 2) or _asks_for_nothing(sentence):
                continue
            weight = hits + (3 if asks else 0)
            weight += index / max(len(sentences), 1)  # requests usually close a narrative
            candidates.append((weight, order, index, sentence))
    return sorted(candidates, key=lambda c: (-c[0], c[1], c[2]))


def consumer_request(evidence: list[EvidenceText]) -> dict:
    """What the consumer asks for: {"kind", "statement", "quote", "evidence_id"}. The quote is
    exact text of the cited evidence (the sentence the request is read from); the statement is
    a short plain-words summary, with the amount when money is asked back."""
    ranked = _request_candidates(evidence)
    implied = None
    if not ranked:
        for order, item in enumerate(evidence):
            for index, sentence in enumerate(split_sentences(item.text)):
                if _REMEDY_NOUN.search(sentence):
                    implied = (0.0, order, index, sentence)
                    break
            if implied:
                break
    chosen = ranked[:3] if ranked else ([implied] if implied else [])
    for _, order, _, sentence in chosen:
        for kind, pattern, statement in REQUEST_KINDS:
            if kind == "refund" and _REFUND_GIVEN.search(sentence):
                continue
            if (match := pattern.search(sentence)):
                amounts = [a for a in money_amounts(sentence) if a > 0]
                if kind == "refund" and amounts:
                    statement = f"A refund of ${max(amounts):,.2f}"
                if implied:
                    statement += " (implied by the narrative, not asked in so many words)"
                return {"kind": kind, "statement": statement, "quote": quote_of(sentence, match),
                        "evidence_id": evidence[order].id}
    if chosen:
        _, order, _, sentence = chosen[0]
        return {"kind": "other", "statement": shorten(sentence, 200), "quote": quote_of(sentence),
                "evidence_id": evidence[order].id}
    return {"kind": "none", "statement": "No specific request is stated in the evidence.", "quote": "",
            "evidence_id": None}


# --- triage ---------------------------------------------------------------------------------
def min_confidence() -> float:
    """ARBITER_TRIAGE_MIN_CONFIDENCE (default 0.6) — read per call, so a settings override applies."""
    try:
        from django.conf import settings

        return float(getattr(settings, "ARBITER_TRIAGE_MIN_CONFIDENCE", DEFAULT_MIN_CONFIDENCE))
    except Exception:  # noqa: BLE001 - outside Django (a plain script): the default
        return DEFAULT_MIN_CONFIDENCE


DEFAULT_MIN_CONFIDENCE = 0.6


def _top(distribution: dict[str, float]) -> str | None:
    return min(distribution, key=lambda label: (-distribution[label], label)) if distribution else None


def narrative_against_company(views: dict, company: str, received) -> dict:
    """{"company_product", "narrative_reading", "doubt"} when the narrative alone and the company prior disagree on the
    product (the products compared as they are learnt, so a retired label does not count as a
    disagreement), else {}. `doubt` is the sentence the finding shows."""
    narrative, prior = _top(views.get("narrative") or {}), _top(views.get("company") or {})
    if not narrative or not prior or narrative == prior:
        return {}
    reads = taxonomy.label_in_force(narrative, received)
    usual = taxonomy.label_in_force(prior, received)
    return {"company_product": usual, "narrative_reading": reads,
            "doubt": (f"The narrative reads like {reads}; complaints against {company} are usually {usual}. "
                      "The two disagree, so the product needs a person's check.")}


def triage(context: dict) -> dict:
    case = case_of(context)
    evidence = evidence_of(context)
    text = _classifier_text(case, evidence)
    company = str(case.get("company") or "").strip()
    received = parse_date(case.get("received_at"))
    model = get_classifier() if text else None
    predicted = model.predict(text, company, received) if model else None
    views = model.product_views(text, company) if model else {}
    product_probabilities = views.get("combined") or {}

    def choose(field: str) -> tuple[str | None, float]:
        recorded = str(case.get(field) or "").strip()
        guess = predicted[field] if predicted else None
        if recorded:
            if field == "product" and guess and guess.label != recorded \
                    and guess.confidence >= OVERRIDE_PROBABILITY \
                    and product_probabilities.get(taxonomy.current_product(recorded), 0.0) <= RECORDED_LABEL_CEILING:
                return guess.label, guess.confidence
            agreement = guess.confidence if guess and guess.label == recorded else 0.0
            return recorded, max(RECORDED_CONFIDENCE, agreement)
        if guess and guess.label:
            return guess.label, guess.confidence
        return None, 0.0

    product, product_confidence = choose("product")
    recorded_product = str(case.get("product") or "").strip()
    if recorded_product and product != recorded_product and predicted:
        # The product was overridden: the recorded issue and sub-product belong to the other
        # product, so the classifier's (restricted to the new product) are used instead.
        issue, issue_confidence = predicted["issue"].label, predicted["issue"].confidence
        sub_product = predicted["sub_product"].label
    else:
        issue, issue_confidence = choose("issue")
        sub_product, _ = choose("sub_product")
    # A recorded product the narrative reads, with confidence, as another product: kept, but named
    # so the adjudicator can dispute it.
    narrative_product = None
    if recorded_product and predicted and predicted["product"].label != recorded_product \
            and taxonomy.current_product(predicted["product"].label) != taxonomy.current_product(recorded_product) \
            and predicted["product"].confidence >= min_confidence():
        narrative_product = predicted["product"].label
    needs_analyst = bool(product) and not recorded_product and product_confidence < min_confidence()
    request = consumer_request(evidence)
    remedy = requested_remedy(evidence)
    disagreement = narrative_against_company(views, company, received)
    return {
        "product": product or UNCLASSIFIED,
        "sub_product": sub_product or None,
        "issue": issue or UNCLASSIFIED,
        "respondent": company or "Respondent not recorded",
        "requested_remedy": remedy,
        "confidence": round(product_confidence, 4),
        "issue_confidence": round(issue_confidence, 4),
        "needs_analyst": needs_analyst or not product,
        "narrative_product": narrative_product,
        **disagreement,
        "consumer_request": request,
        "evidence_refs": [item.id for item in evidence if item.id is not None],
    }
