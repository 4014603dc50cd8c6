"""The case-analysis graph: specialists analyse a case and leave findings, artifacts,
proposals and a notice draft — never a domain change.

    triage -> evidence_analyst -> risk_assessor -> policy_checker -> adjudicator -> reflect
           (reflect may re-plan once: revisit some specialists, then adjudicate and reflect again)
           -> proposer -> notice_drafter -> end

Every domain effect goes through the tool executor (runs.tools) into cases.services as a
Proposal or a Notice draft submitted for approval. Model output is validated by the schemas in
agents.schemas; ids a model cites are kept only if they are evidence the model was actually shown.
"""

from __future__ import annotations

import re

from django.utils import timezone

from agents import taxonomy
from agents.citations import EvidenceTexts, dispute_in_words, verify_citations
from agents.graphs.guards import (
    CaseText,
    below_threshold,
    case_text,
    catalogued,
    disputes_classification,
    first_paragraph,
    floor_for,
    floored_risk,
    raised,
    readable,
    request_to_address,
    risk_first_paragraph,
    scrub,
    triage_confidence_dispute,
)
from agents.graphs.records import continue_plan, record_dropped, record_instructions, shown_evidence
from agents.schemas import (
    UNCLASSIFIED,
    Adjudication,
    Dispute,
    EvidenceSummary,
    NoticeDraftOutput,
    PolicyCheck,
    Reflection,
    RiskAssessment,
    TriageOutput,
)
from cases import policy
from cases.deadlines import DEADLINE_FIELDS, add_days
from cases.models import CASE_TRANSITIONS, Notice, NoticeStatus, Proposal, ProposalKind, ProposalStatus
from cases.notice_checker import check_notice, request_statement
from runs.graph import Graph, Node, NodeContext, NodeResult
from runs.tools import idempotency_key

SPECIALISTS = ("triage", "evidence_analyst", "risk_assessor", "policy_checker", "adjudicator")
PLAN = (*SPECIALISTS, "reflect", "proposer", "notice_drafter")
MAX_REPLANS = 1
DEAD_NOTICE_STATUSES = {NoticeStatus.WITHDRAWN, NoticeStatus.REJECTED}


# --- specialists ------------------------------------------------------------------------------

def triage(ctx: NodeContext) -> NodeResult:
    """Classify. Labels outside the CFPB taxonomy, or an issue the CFPB does not publish for the
    product, are refused (the triage then needs an analyst); an unclassified product or issue, or a
    confidence below the threshold when the case records no product, needs an analyst too; the
    consumer's request is kept only with a quote that occurs in the cited evidence."""
    out: TriageOutput = ctx.call_model(schema=TriageOutput)
    refs = shown_evidence(ctx, out.evidence_refs)
    data = out.model_dump(mode="json") | {"evidence_refs": refs}
    invalid = [f"{field} {value!r}" for field, value, allowed in (
        ("product", out.product, taxonomy.products()), ("issue", out.issue, taxonomy.issues()))
        if value != UNCLASSIFIED and value not in allowed]
    if not invalid and UNCLASSIFIED not in (out.product, out.issue) \
            and out.issue not in taxonomy.published_issues_of(out.product):
        invalid = [f"issue {out.issue!r} (not an issue of {out.product!r})"]
    if invalid:
        ctx.note(f"triage: label(s) outside the CFPB taxonomy refused: {', '.join(invalid)}.")
        data["needs_analyst"] = True
        data["invalid_labels"] = invalid
    unclassified = UNCLASSIFIED in (out.product, out.issue)
    if not data.get("needs_analyst") and (unclassified or below_threshold(out.confidence, ctx.case.product,
                                                                          _min_confidence())):
        low = f"confidence {out.confidence:.2f} is below {_min_confidence():.2f}"
        ctx.note(f"triage: {'no product or issue was classified' if unclassified else low}; an analyst confirms it.")
        data["needs_analyst"] = True
    dropped = []
    request = data.get("consumer_request")
    if request and request.get("quote"):
        check = verify_citations(EvidenceTexts(ctx.case), [request], what="consumer request")
        if check.dropped:
            dropped = check.dropped
            data["consumer_request"] = request | {"quote": "", "evidence_id": None}
    record_dropped(ctx, "triage", dropped)
    data["dropped_citations"] = dropped
    read = case_text(ctx.case)
    request = data.get("consumer_request") or {}
    if request and (scrub(str(request.get("statement") or ""), read)[1] or scrub(str(request.get("quote") or ""), read)[1]):
        # A "request" that is text addressed to the reviewer is no request of the consumer's.
        ctx.note("triage: the consumer's request read as an instruction to the reviewer and was set aside.")
        data["consumer_request"] = {"kind": "none", "statement": "No specific request is stated in the evidence.",
                                    "quote": "", "evidence_id": None}
    remedy, removed = scrub(str(data.get("requested_remedy") or ""), read)
    data["requested_remedy"] = "" if removed else remedy
    ctx.observe(data, key="triage")
    request = data.get("consumer_request") or {}
    wants = request_statement(request) or request_statement(data["requested_remedy"]) or "not stated"
    if data.get("needs_analyst"):
        why = (f"labels outside the taxonomy ({', '.join(invalid)})" if invalid else
               "no product or issue was classified" if unclassified else
               f"confidence {out.confidence:.2f} is below {_min_confidence():.2f}"
               if out.confidence < _min_confidence() else "the triage agent asked for a person's check")
        summary = (f"Needs an analyst: product and issue are uncertain ({why}). Best guess: {out.product} / "
                   f"{out.issue}; respondent: {out.respondent}; the consumer asks for: {wants}.")
    else:
        summary = (f"Product: {out.product}{' / ' + out.sub_product if out.sub_product else ''}; "
                   f"issue: {out.issue} (confidence {out.confidence:.2f}); respondent: {out.respondent}; "
                   f"the consumer asks for: {wants}.")
    if out.doubt:
        summary = f"{summary} {out.doubt}"
    ctx.finding(type="triage", confidence=out.confidence, evidence_refs=refs, data=data, summary=summary)
    ctx.artifact(kind="triage", content=data)
    return continue_plan(ctx)


def _min_confidence() -> float:
    from django.conf import settings

    return float(settings.ARBITER_TRIAGE_MIN_CONFIDENCE)


def evidence_analyst(ctx: NodeContext) -> NodeResult:
    out: EvidenceSummary = ctx.call_model(schema=EvidenceSummary)
    refs = shown_evidence(ctx, out.evidence_refs)
    shown = [p.model_dump(mode="json") for p in out.key_points if shown_evidence(ctx, [p.evidence_id])]
    read = case_text(ctx.case)
    shown = [p for p in shown if not scrub(p["text"], read)[1]]  # a key point is never an instruction
    check = verify_citations(EvidenceTexts(ctx.case), shown, quote_key="text", what="key point")
    points = check.verified
    summary, _removed = scrub(out.summary, read)
    summary = summary or "The evidence was read; its summary held only text addressed to the reviewer."
    ctx.observe(out.model_copy(update={"summary": summary, "key_points": [p for p in out.key_points
                                                                             if p.model_dump(mode="json") in shown]}))
    record_dropped(ctx, "evidence_analyst", check.dropped)
    record_instructions(ctx, read)
    ctx.finding(type="evidence_summary", summary=summary, evidence_refs=refs, confidence=0.6,
                data={"key_points": points})
    ctx.artifact(kind="evidence_summary", content={"summary": summary, "key_points": points,
                                                   "evidence_refs": refs, "dropped_citations": check.dropped})
    if len(shown) != len(out.key_points):
        ctx.note(f"evidence_analyst: dropped {len(out.key_points) - len(shown)} citation(s) to evidence it was "
                 f"not shown.")
    return continue_plan(ctx)


def risk_assessor(ctx: NodeContext) -> NodeResult:
    """Risk from signals, each citing its evidence and quote. A quote that does not occur in the
    cited evidence is dropped (the signal stays, unquoted, and reflection may ask again)."""
    out: RiskAssessment = ctx.call_model(schema=RiskAssessment)
    refs = shown_evidence(ctx, out.evidence_refs)
    signals, dropped = [], []
    texts = EvidenceTexts(ctx.case)
    for signal in out.signals:
        item = signal.model_dump(mode="json")
        if item.get("evidence_id") is not None and item.get("quote"):
            check = verify_citations(texts, [item], what=f"{signal.code} signal")
            if check.dropped:
                dropped += check.dropped
                item["quote"] = ""
            else:
                item = check.verified[0]
        signals.append(item)
    read = case_text(ctx.case)
    signals, unknown = catalogued([s | {"description": scrub(str(s.get("description") or ""), read)[0]
                                        or str(s.get("code"))} for s in signals])
    if unknown:
        ctx.note(f"risk_assessor: ignored signal codes no scoring rule knows: {', '.join(unknown)}")
    level, why = floored_risk(ctx.case, read, out.risk_level, signals)
    rationale = scrub(out.rationale, read)[0]
    rationale = f"{why} The risk agent's own reading: {rationale}" if why and rationale else (
        why or rationale or f"Risk {level}.")
    observed = out.model_dump(mode="json") | {"signals": signals, "rationale": rationale, "risk_level": level}
    ctx.observe(observed, key="risk_assessor")
    record_dropped(ctx, "risk_assessor", dropped)
    headline = f"Risk {level}"
    summary = rationale if rationale.lower().startswith(headline.lower()) else f"{headline}: {rationale}"
    ctx.finding(type="risk_level", summary=summary, evidence_refs=refs,
                confidence=out.confidence, data={"risk_level": level, "signals": signals})
    ctx.artifact(kind="risk_assessment", content={"risk_level": level, "model_risk_level": out.risk_level,
                                                  "rationale": rationale,
                                                  "signals": signals, "evidence_refs": refs,
                                                  "confidence": out.confidence, "dropped_citations": dropped})
    return continue_plan(ctx)


def policy_checker(ctx: NodeContext) -> NodeResult:
    out: PolicyCheck = ctx.call_model(schema=PolicyCheck)
    read = case_text(ctx.case)
    out = out.model_copy(update={
        "rules": [r.model_copy(update={"reason": scrub(r.reason, read)[0]}) for r in out.rules],
        "notice_reason": scrub(out.notice_reason, read)[0]})
    known = [rule for rule in out.rules if rule.code in policy.RULES_BY_CODE]
    if len(known) != len(out.rules):
        ctx.note("policy_checker: ignored rule codes that are not in cases/policy.py: "
                 + ", ".join(sorted({r.code for r in out.rules} - set(policy.RULES_BY_CODE))))
    ctx.observe(out.model_copy(update={"rules": known}))
    for rule in known:
        if rule.applies:
            deadline = f" (deadline {rule.deadline})" if rule.deadline else ""
            ctx.finding(type="policy_rule", summary=f"{rule.code} applies{deadline}: {rule.reason}",
                        confidence=0.8, data={"code": rule.code, "deadline": rule.deadline})
    ctx.finding(type="notice_due", summary=("A response notice is due: " if out.notice_due else
                                            "No notice is due: ") + out.notice_reason,
                confidence=0.8, data={"notice_due": out.notice_due})
    ctx.artifact(kind="policy_check", content={"rules": [r.model_dump(mode="json") for r in known],
                                               "notice_due": out.notice_due, "notice_reason": out.notice_reason,
                                               "policy_version": policy.POLICY_VERSION})
    return continue_plan(ctx)


def adjudicator(ctx: NodeContext) -> NodeResult:
    """Merge the specialists' findings. A risk level that contradicts the risk assessor's becomes a
    finding of its own that `contradicts` it; each dispute becomes a dispute artifact naming the
    findings on both sides. Nothing is deleted: both positions stay on record."""
    out: Adjudication = _guarded_adjudication(ctx, ctx.call_model(schema=Adjudication))
    ctx.observe(out)
    assessed = ctx.committed_findings(agent="risk_assessor", type="risk_level").last()
    assessed_level = (assessed.data or {}).get("risk_level") if assessed else None
    contradiction = None
    if assessed is not None and assessed_level != out.risk_level:
        contradiction = ctx.finding(type="risk_level", contradicts=assessed.pk, confidence=out.confidence,
                                    evidence_refs=assessed.evidence_refs, data={"risk_level": out.risk_level},
                                    summary=f"Risk {out.risk_level}, not {assessed_level}: {out.summary}")
    risk_dispute_written = False
    triage_finding = ctx.committed_findings(agent="triage", type="triage").last()
    for dispute in out.disputes:
        topic = dispute.topic.lower()
        sides: list = []
        if "risk" in topic and contradiction is not None:
            sides, risk_dispute_written = [assessed.pk, contradiction], True
        elif "risk" in topic and assessed is not None:
            sides = [assessed.pk]
        elif any(word in topic for word in ("product", "issue", "triage", "transition")) and triage_finding is not None:
            sides = [triage_finding.pk]
        ctx.artifact(kind="dispute", content=dispute.model_dump(mode="json"), findings=sides)
        # Kept and shown: each dispute is also a finding, so it appears with the case's findings.
        ctx.finding(type="dispute", confidence=out.confidence, data=dispute.model_dump(mode="json"),
                    summary=dispute_in_words(dispute.model_dump(mode="json"))[:2000])
    if contradiction is not None and not risk_dispute_written:
        ctx.artifact(kind="dispute", findings=[assessed.pk, contradiction], content={
            "topic": "risk level",
            "positions": [f"risk_assessor: {assessed_level}", f"adjudicator: {out.risk_level}"],
            "resolution": f"The adjudicator's level ({out.risk_level}) is proposed; both findings are kept."})
    ctx.finding(type="adjudication", summary=out.summary, confidence=out.confidence,
                data={"risk_level": out.risk_level, "recommended_transition": out.recommended_transition})
    ctx.artifact(kind="adjudication", content=out.model_dump(mode="json"))
    return continue_plan(ctx)


def _guarded_adjudication(ctx: NodeContext, out: Adjudication) -> Adjudication:
    """Whatever the provider answered: its words without text addressed to the reviewer, and its
    risk level at least the policy floor of the signals the evidence and the case record show."""
    read = case_text(ctx.case)
    summary = scrub(out.summary, read)[0] or "The agents' summary held only text addressed to the reviewer."
    disputes = [d.model_copy(update={"positions": [scrub(p, read)[0] or "(set aside)" for p in d.positions],
                                     "resolution": scrub(d.resolution, read)[0]}) for d in out.disputes]
    signals = (ctx.state.observations.get("risk_assessor") or {}).get("signals") or []
    minimum, because = floor_for(ctx.case, read, signals)
    level = raised(out.risk_level, minimum)
    if level != out.risk_level:
        words = ", ".join(because)
        ctx.note(f"adjudicator: risk {out.risk_level} raised to {level}, the policy minimum for {words}.")
        disputes.append(Dispute(topic="risk level", positions=[
            f"adjudicator: {out.risk_level}", f"policy: {words} require(s) at least {minimum}"],
            resolution=f"Raised to {level}: policy minimums prevail over any agent's level."))
        summary = summary.replace(f"Risk {out.risk_level}", f"Risk {level}", 1)
    triage = ctx.state.observations.get("triage") or {}
    if triage.get("needs_analyst") and not disputes_classification([d.topic for d in disputes]):
        disputes.append(Dispute(**triage_confidence_dispute(triage, _min_confidence())))
    return out.model_copy(update={"summary": summary, "disputes": disputes, "risk_level": level})


def _observed_gaps(ctx: NodeContext) -> list[tuple[str, list[str]]]:
    """Gaps in this run's outputs that a second look may fill (provider-agnostic)."""
    gaps = []
    observed = ctx.state.observations
    triage_out = observed.get("triage") or {}
    if triage_out.get("invalid_labels"):
        gaps.append((f"triage answered labels outside the CFPB taxonomy ({', '.join(triage_out['invalid_labels'])})",
                     ["triage"]))
    unquoted = [str(s.get("code")) for s in (observed.get("risk_assessor") or {}).get("signals") or []
                if isinstance(s, dict) and s.get("evidence_id") is not None and not s.get("quote")]
    if unquoted:
        gaps.append((f"signal(s) {', '.join(unquoted)} cite evidence without a verified quote", ["risk_assessor"]))
    if triage_out.get("dropped_citations"):
        gaps.append(("the consumer's request was quoted with words the evidence does not contain", ["triage"]))
    return gaps


def reflect(ctx: NodeContext) -> NodeResult:
    """Look back once: if the adjudication left disputes unresolved or confidence low, revisit the
    specialists concerned, adjudicate again, and reflect again (which will not re-plan twice)."""
    replans = int(ctx.get("replans", 0))
    out: Reflection = ctx.call_model(schema=Reflection, extra_context={"replans_done": replans})
    gaps = _observed_gaps(ctx)
    if gaps and not out.replan and replans < MAX_REPLANS:
        # Whatever the model concluded, a gap the run itself can see (an output that cited words the
        # evidence does not contain, a label outside the taxonomy) is worth one more look.
        out = Reflection(replan=True, reason=("Re-plan: " + "; ".join(why for why, _ in gaps) + ".")[:1000],
                         revisit=[node for _, nodes in gaps for node in nodes])
    ctx.observe(out)
    ctx.artifact(kind="reflection", content=out.model_dump(mode="json") | {"replans_done": replans})
    if out.replan and replans < MAX_REPLANS:
        revisit = [name for name in SPECIALISTS if name in out.revisit and name != "adjudicator"]
        revisit.append("adjudicator")
        ctx.set("replans", replans + 1)
        ctx.note(f"reflect: re-plan ({out.reason}) — revisiting {', '.join(revisit)}.")
        ctx.set_plan([ctx.node, *revisit, "reflect", "proposer", "notice_drafter"])
        return ctx.goto(revisit[0])
    if out.replan:
        ctx.note(f"reflect: a further re-plan was asked for and declined (limit {MAX_REPLANS}): {out.reason}")
    return continue_plan(ctx)


# --- effects: proposals and the notice draft ---------------------------------------------------

def _pending_same(case, kind: str, payload_key: str, value: str) -> Proposal | None:
    """An identical pending proposal (from this or another run). A pending proposal's
    preconditions still hold: one whose field changed is marked stale (ADR 0006)."""
    for proposal in Proposal.objects.filter(case=case, kind=kind, status=ProposalStatus.PENDING):
        if proposal.payload.get(payload_key) == value:
            return proposal
    return None


def _transition_possible(case, name: str | None) -> bool:
    return bool(name) and name in CASE_TRANSITIONS and getattr(case, name)._django_fsm.has_transition(case.status)


def proposer(ctx: NodeContext) -> NodeResult:
    """Turn the adjudication into proposals (risk level, next status) for a person to approve; a
    focused re-run (input `reask_proposal_id` + `kind`) proposes only that kind."""
    case = ctx.case
    adjudication = ctx.state.observations.get("adjudicator") or {}
    risk = ctx.state.observations.get("risk_assessor") or {}
    cited = [int(r) for r in risk.get("evidence_refs") or [] if str(r).isdigit()]
    on_case = set(case.evidence.filter(pk__in=cited).values_list("pk", flat=True))
    refs = [r for r in cited if r in on_case]
    made, skipped = [], []
    # "Ask the agents again" on a stale proposal: the re-run proposes only for that question.
    focus = (ctx.run.input or {}).get("kind") if (ctx.run.input or {}).get("reask_proposal_id") else None

    level = adjudication.get("risk_level")
    if focus and focus != ProposalKind.RISK_LEVEL:
        skipped.append(f"risk level: this re-run asks about {focus} only")
    elif level and level != case.risk_level:
        existing = _pending_same(case, ProposalKind.RISK_LEVEL, "risk_level", level)
        if existing is not None:
            skipped.append(f"risk level {level}: already proposed as P{existing.pk}")
        else:
            rationale = _risk_rationale(ctx, level, adjudication, risk)
            result = ctx.tool("proposal_create", action="propose-risk-level", args={
                "kind": ProposalKind.RISK_LEVEL, "payload": {"risk_level": level}, "rationale": rationale[:4000],
                "evidence_refs": refs})
            made.append({"what": f"risk level {level}", "ok": result.ok, "status": result.status,
                         "proposal_id": result.result.get("proposal_id"), "error": result.error})

    transition = adjudication.get("recommended_transition")
    if focus and focus != ProposalKind.STATUS_TRANSITION:
        skipped.append(f"transition: this re-run asks about {focus} only")
    elif transition and not _transition_possible(case, transition):
        skipped.append(f"transition {transition}: not possible from {case.status}")
    elif transition:
        existing = _pending_same(case, ProposalKind.STATUS_TRANSITION, "transition", transition)
        if existing is not None:
            skipped.append(f"transition {transition}: already proposed as P{existing.pk}")
        else:
            payload = {"transition": transition}
            first, rest = first_paragraph(adjudication.get("summary") or "")
            if transition in policy.TRANSITIONS_REQUIRING_REASON:
                payload["reason"] = readable(first, [])[:1000]
            result = ctx.tool("proposal_create", action="propose-transition", args={
                "kind": ProposalKind.STATUS_TRANSITION, "payload": payload,
                "rationale": readable(first or f"Recommended next step: {transition.replace('_', ' ')}.", [rest])[:4000],
                "evidence_refs": refs})
            made.append({"what": f"transition {transition}", "ok": result.ok, "status": result.status,
                         "proposal_id": result.result.get("proposal_id"), "error": result.error})

    ctx.set("proposals", [m["proposal_id"] for m in made if m["ok"]])
    for item in made:
        if not item["ok"]:
            ctx.note(f"proposer: {item['what']} was not proposed: {item['error']}")
    for reason in skipped:
        ctx.note(f"proposer: skipped {reason}")
    ctx.artifact(kind="proposals", source_refs={"case_id": case.pk, "case_version": case.version},
                 content={"made": made, "skipped": skipped, "case_version": case.version})
    return continue_plan(ctx)


def _risk_rationale(ctx: NodeContext, level: str, adjudication: dict, risk: dict) -> str:
    """What a person reads first on the card and in the inbox: the risk and what it rests on, in
    words, with a verified quotation; the agents' summaries and the points table fold below it."""
    signals = [s for s in risk.get("signals") or [] if isinstance(s, dict)]
    floor_codes = []
    for dispute in adjudication.get("disputes") or []:
        if str(dispute.get("resolution") or "").startswith("Raised to") and "policy" in " ".join(dispute.get("positions")
                                                                                              or []):
            floor_codes = [c for c in ("FRAUD-ID", "SCRA", "OLDER-AM", "HARASSMENT")
                           if c in " ".join(dispute.get("positions") or [])]
    first = risk_first_paragraph(level, signals, floor_codes)
    _, adjudication_rest = first_paragraph(adjudication.get("summary") or "")
    adjudication_rest = adjudication_rest.removeprefix("Details:").strip()
    risk_first, risk_rest = first_paragraph(risk.get("rationale") or "")
    # The risk agent's own first paragraph is kept below only when it says something the first
    # paragraph above does not (a model's reasoning); the offline analyst's says the same.
    said = " ".join(first.split()).lower()
    sentences = [" ".join(part.split()).lower() for part in re.split(r"(?<=[.”])\s+", risk_first) if part.strip()]
    risk_first = "" if all(sentence in said for sentence in sentences) else risk_first
    risk_rest = risk_rest.removeprefix("Details:").strip()
    risk_detail = (f"Risk rationale: {risk_first} {risk_rest}" if risk_first
                   else f"Risk {risk_rest}" if risk_rest.startswith("scoring table") else f"Risk rationale: {risk_rest}")
    return readable(first, ["Details: " + adjudication_rest if adjudication_rest else "",
                            risk_detail.strip() if risk_rest or risk_first else ""])


def _notice_due(ctx: NodeContext) -> tuple[bool, str]:
    """Due when the policy requires one now: the case's status allows a response notice and no live
    one exists. The model's opinion alone never drafts a notice, and its "no" is no veto either: a
    notice the policy requires is a floor for every provider, like identity theft's risk level (Gemma
    3 270M answered "no notice due" on new complaints awaiting their acknowledgement)."""
    checked = ctx.state.observations.get("policy_checker") or {}
    case = ctx.case
    if case.status not in policy.NOTICE_DUE_FROM_STATUSES:
        return False, f"the case is {case.status}; notices are due only from {sorted(policy.NOTICE_DUE_FROM_STATUSES)}"
    # A notice this very step drafted in an attempt that died is its own, not another's:
    # the retried step re-reads it through the tool calls' idempotency keys and finishes it.
    own = idempotency_key(run_id=ctx.run.pk, sequence=ctx.sequence, action="draft-notice")
    live = (Notice.objects.filter(case=case, kind="response").exclude(status__in=DEAD_NOTICE_STATUSES)
            .exclude(idempotency_key=own).first())
    if live is not None:
        return False, f"a response notice already exists ({live.get_status_display().lower()})"
    if checked.get("notice_due"):
        return True, checked.get("notice_reason", "")
    by = f" by {case.acknowledge_due.isoformat()}" if case.acknowledge_due else ""
    ctx.note(f"notice_drafter: the policy check answered that no notice is due "
             f"({checked.get('notice_reason') or 'no reason given'}); the policy requires one, so it is drafted.")
    return True, f"no response notice has been drafted or sent; one is due{by} (acknowledge within 15 days)"


def _drafting_facts(ctx: NodeContext) -> dict:
    """What the drafter must ground the notice in: the stored due dates, whether a notice
    was already sent, whether the response is already late, and the consumer's request (triage's
    `consumer_request["statement"]` when present, else its `requested_remedy`)."""
    case = ctx.case
    triaged = ctx.state.observations.get("triage") or {}
    request = triaged.get("consumer_request") or triaged.get("requested_remedy") or ""
    today = timezone.localdate()
    sent = case.notices.filter(status=NoticeStatus.SENT).exists()
    late = bool(case.response_due and case.response_due < today and not sent)
    return {
        "today": today.isoformat(),
        "due_dates": {field: (getattr(case, field).isoformat() if getattr(case, field) else None)
                      for field in DEADLINE_FIELDS},
        "notice_sent": sent,
        "response_late": late,
        # When late, the letter apologises and commits to this date (five working days ahead).
        "commit_date": add_days(today, 5, business=True).isoformat() if late else None,
        "consumer_request": request_to_address(request),
        # The request with its kind and verified quotation: restated in our words, or quoted verbatim.
        "consumer_request_detail": request if isinstance(request, dict) else {},
    }


def _scrubbed(ctx: NodeContext, draft: NoticeDraftOutput, read: CaseText) -> NoticeDraftOutput:
    """The draft without sentences addressed to the reviewer or repeating such evidence text."""
    body, removed = scrub(draft.body, read)
    subject, removed_subject = scrub(draft.subject, read)
    if not (removed or removed_subject):
        return draft
    ctx.note(f"notice_drafter: {len(removed) + len(removed_subject)} sentence(s) of the draft read as instructions "
             f"or repeated evidence text addressed to the reviewer, and were left out.")
    return draft.model_copy(update={"body": body or "(empty)", "subject": subject or "Your complaint"})


def _check_draft(ctx: NodeContext, draft: NoticeDraftOutput, facts: dict) -> list[dict]:
    case = ctx.case
    return check_notice(case=case, recipient=case.complainant_email or "", subject=draft.subject, body=draft.body,
                        consumer_request=facts["consumer_request"])


def notice_drafter(ctx: NodeContext) -> NodeResult:
    """Draft the response notice and submit it for a supervisor's approval, when one is due. It is
    never sent from here: sending needs a person's approval of the exact text.

    The draft is grounded: the model gets the stored due dates, and its text goes
    through the notice checker; a flagged draft is revised once with the flags, and if still
    flagged it is left as a draft (not submitted) with a finding naming the flags. A response that
    is already late gets a finding too (the draft says so, without promising a past date)."""
    due, reason = _notice_due(ctx)
    if not due:
        ctx.note(f"notice_drafter: no notice drafted — {reason}.")
        return ctx.end(f"No notice drafted: {reason}.")
    facts = _drafting_facts(ctx)
    if facts["response_late"]:
        ctx.finding(type="deadline_missed", confidence=1.0,
                    summary=(f"The response was due on {facts['due_dates']['response_due']} and no notice has been "
                             f"sent: the response is late. The draft says so and promises no past date."),
                    data={"response_due": facts["due_dates"]["response_due"]})
    read = case_text(ctx.case)
    draft = _scrubbed(ctx, ctx.call_model(schema=NoticeDraftOutput, extra_context=facts), read)
    flags = _check_draft(ctx, draft, facts)
    if flags:
        ctx.note(f"notice_drafter: the checker flagged the draft ({', '.join(f['code'] for f in flags)}); revising.")
        draft = _scrubbed(ctx, ctx.call_model(schema=NoticeDraftOutput, extra_context=facts | {"check_flags": flags}),
                          read)
        flags = _check_draft(ctx, draft, facts)
    drafted = ctx.tool("notice_draft", action="draft-notice",
                       args={"subject": draft.subject, "body": draft.body, "kind": "response",
                             "consumer_request": facts["consumer_request"]})
    if not drafted.ok:
        ctx.note(f"notice_drafter: the draft was refused: {drafted.error}")
        return ctx.end(f"Notice not drafted: {drafted.error}")
    notice_id = drafted.result["notice_id"]
    stored_flags = Notice.objects.filter(pk=notice_id).values_list("check_flags", flat=True).first() or []
    if flags or stored_flags:
        flagged = stored_flags or flags
        ctx.finding(type="notice_flagged", confidence=1.0, data={"notice_id": notice_id, "flags": flagged},
                    summary="The drafted notice is flagged by the notice checker and left as a draft: "
                            + "; ".join(f["message"] for f in flagged)[:1500])
        ctx.set("notice_id", notice_id)
        ctx.artifact(kind="notice_draft", content={"notice_id": notice_id, "subject": draft.subject,
                                                   "body": draft.body, "status": "draft", "reason_due": reason,
                                                   "check_flags": flagged})
        return ctx.end("Notice drafted and left as a flagged draft for a person to revise.")
    submitted = ctx.tool("notice_submit", action="submit-notice", args={"notice_id": notice_id})
    status = submitted.result.get("status") if submitted.ok else drafted.result.get("status")
    if not submitted.ok:
        ctx.note(f"notice_drafter: the notice was drafted but not submitted: {submitted.error}")
    ctx.set("notice_id", notice_id)
    ctx.artifact(kind="notice_draft", content={"notice_id": notice_id, "subject": draft.subject, "body": draft.body,
                                               "status": status, "reason_due": reason, "check_flags": []})
    return ctx.end(f"Notice drafted and {'awaiting approval' if submitted.ok else 'left as a draft'}.")


# --- the graph -----------------------------------------------------------------------------------

def _goal(input: dict, case) -> str:
    return (f"Analyse {case.reference} ({case.title[:120]}): classify it, summarise and weigh its evidence, "
            f"assess risk, check policy, then propose the next status and risk level and draft a notice where "
            f"one is due — for a person to approve.")


GRAPH = Graph(
    name="case_analysis",
    version="1",
    start="triage",
    plan=PLAN,
    goal=_goal,
    nodes=(
        Node("triage", triage, version="1", phase="planning", instructions=(
            "Classify the complaint: product (and sub-product), issue, the respondent company, and the remedy the "
            "consumer asks for. Cite the evidence ids you rely on.")),
        Node("evidence_analyst", evidence_analyst, version="1", instructions=(
            "Summarise the evidence faithfully. Every key point quotes or paraphrases one evidence item and "
            "cites its id. Do not speculate beyond the evidence.")),
        Node("risk_assessor", risk_assessor, version="1", instructions=(
            "Assess the case's risk level (low, medium, high, critical) from concrete signals: monetary loss, "
            "fraud or identity theft, older Americans or servicemembers, repeated contact, deadlines. Give the "
            "rationale and the evidence each signal rests on.")),
        Node("policy_checker", policy_checker, version="1", instructions=(
            "Apply the listed policy rules to this case: which apply, why, and their deadlines counted from the "
            "received date. Say whether a response notice is due.")),
        Node("adjudicator", adjudicator, version="1", instructions=(
            "Merge the earlier agents' outputs into one assessment: the risk level you support, the next case "
            "transition you recommend (or none), and every disagreement between agents as a dispute with both "
            "positions and how you resolved it.")),
        Node("reflect", reflect, version="1", phase="reflecting", instructions=(
            "Review the adjudication. Ask to re-plan only if a dispute is unresolved or confidence is low, and "
            "name the agents to revisit.")),
        Node("proposer", proposer, version="1"),
        Node("notice_drafter", notice_drafter, version="2", instructions=(
            "Draft the response notice to the consumer as a complaint team's letter: greeting; what we received "
            "and its reference; what happens next and by when; how to reach us quoting the reference; signed by "
            "the Consumer Complaints Team. Plain, courteous, no promises of outcome, no personal data beyond what "
            "is needed. Write dates in words and use only the dates in due_dates that are today or later (never "
            "a past date); if response_late, apologise and commit to commit_date. Restate consumer_request in your "
            "own words WITHOUT quotation marks (leave it out when empty); put in quotation marks only the exact "
            "words of consumer_request_detail.quote. Claim no action, contact or finding (\"we have asked / "
            "reviewed / refunded / contacted\", \"we are working with the company\") that the case's events do "
            "not show, and never restate evidence text as your own words. If check_flags is given, fix every "
            "flag.")),
    ),
)
