"""The case assistant of the offline analyst: answers from the context, detects intents by rules
(only in context["question"], the latest user message — never in evidence, artifacts or earlier
turns), and summarises threads for compaction."""

from __future__ import annotations

import re

from agents.text import first_sentence, is_instruction, shorten, split_sentences
from analyst.context import artifact_content, as_int, case_of, evidence_of, parse_date, today_of
from cases.policy import CAN_APPROVE_NOTICES, CAN_APPROVE_PROPOSALS

# --- intents --------------------------------------------------------------------------------
_TRANSITION_PATTERNS = (
    ("close", r"\bclose\s+(?:the|this|that)\s+(?:case|complaint|file)\b|\bclose\s+(?:this|it)\s*(?:out|down)?\s*(?:[.!?,]|$|\bplease\b|\bnow\b)"),
    ("reopen", r"\bre-?open\s+(?:the|this|that|it)\b"),
    ("mark_ready", r"\bmark\s+(?:it|this|the case|this case)\s+(?:as\s+)?ready\b"),
    ("start_review", r"\bstart\s+(?:the\s+|a\s+)?review\b"),
    ("request_evidence", r"\brequest\s+(?:more\s+|additional\s+|further\s+)?(?:evidence|documents)\b"),
    ("receive_evidence", r"\b(?:the\s+)?(?:requested\s+)?evidence\s+(?:has\s+)?(?:arrived|came in|was received)\b"),
    ("return_to_review", r"\breturn\s+(?:it|the case|this case|this)\s+to\s+review\b"),
    ("triage", r"\btriage\s+(?:the|this|that|it)\b"),
    ("decide", r"\b(?:decide|make a decision on)\s+(?:the|this)\s+case\b"),
)
_LEVEL = r"(?P<level>low|medium|high|critical)"
_RISK_PATTERNS = (
    rf"\b(?:set|change|raise|lower|update|put|make|move)\s+(?:the\s+)?risk(?:\s+level)?\s+(?:to|at|as)\s+{_LEVEL}\b",
    rf"\brisk(?:\s+level)?\s+(?:should|must|needs\s+to|ought\s+to)\s+be\s+{_LEVEL}\b",
    rf"\b(?:mark|flag|treat)\s+(?:it|this|the case|this case)\s+as\s+{_LEVEL}[\s-]+risk\b",
)
_SEND_NOTICE = r"\bsend\s+(?:out\s+)?(?:the|a|this|our|an)\s+(?:response\s+|acknowledge?ment\s+)?(?:notice|letter)\b"
_DRAFT_NOTICE = (r"\b(?:draft|write|prepare|compose)\s+(?:up\s+)?(?:the|a|this|our|an)\s+(?:response\s+|reply\s+|"
                 r"acknowledge?ment\s+)?(?:notice|letter|reply|response)\b")
_ASSIGN = (r"\bassign\s+(?:it\s+|this\s+|the\s+case\s+|this\s+case\s+)?to\s+(?:the\s+)?"
           r"(?P<team>[A-Za-z0-9][\w&/-]*(?:\s+[\w&/-]+){0,4}?)(?:\s+team)?\s*(?:[.!?,;]|$|\bplease\b)")
_REMEMBER = r"\bremember\s+(?:that\s+)?(?P<content>[^.!?\n]{3,300})"
_NEGATED = re.compile(r"\b(?:don'?t|do not|never|not|no need to|shouldn'?t|should not|won'?t|cannot|can'?t|stop)\b"
                      r"(?:\s+\w+){0,3}\s*$", re.IGNORECASE)
_APPROVAL_REQUEST = re.compile(r"\bapprove\b|\bauthori[sz]", re.IGNORECASE)



def _approver_phrase(roles) -> str:
    names = sorted(roles)
    return "a " + " or a ".join(names) if names else "an authorised person"


APPROVER = _approver_phrase(CAN_APPROVE_PROPOSALS)
NOTICE_APPROVER = _approver_phrase(CAN_APPROVE_NOTICES)


def _clauses(question: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<=[.!?;])\s+|\n+", question or "") if c.strip()]


def _not_negated(clause: str, start: int) -> bool:
    return not _NEGATED.search(clause[:start])


def detect_intents(question: str) -> tuple[list[dict], list[str]]:
    """(intents, clauses set aside as instructions to the assistant)."""
    intents: list[dict] = []
    set_aside = []

    def add(kind: str, payload: dict, clause: str):
        if not any(i["kind"] == kind and i["payload"] == payload for i in intents):
            intents.append({"kind": kind, "payload": payload,
                            "rationale": shorten(f"The analyst asked: “{clause}”", 1000)})

    for clause in _clauses(question):
        if is_instruction(clause):
            set_aside.append(clause)
            continue
        for transition, pattern in _TRANSITION_PATTERNS:
            match = re.search(pattern, clause, re.IGNORECASE)
            if match and _not_negated(clause, match.start()):
                add("status_transition", {"transition": transition}, clause)
        for pattern in _RISK_PATTERNS:
            match = re.search(pattern, clause, re.IGNORECASE)
            if match and _not_negated(clause, match.start()):
                add("risk_level", {"risk_level": match.group("level").lower()}, clause)
        match = re.search(_SEND_NOTICE, clause, re.IGNORECASE)
        if match and _not_negated(clause, match.start()):
            add("send_notice", {}, clause)
        match = re.search(_DRAFT_NOTICE, clause, re.IGNORECASE)
        if match and _not_negated(clause, match.start()) and not any(i["kind"] == "send_notice" for i in intents):
            add("draft_notice", {}, clause)
        match = re.search(_ASSIGN, clause, re.IGNORECASE)
        if match and _not_negated(clause, match.start()):
            add("assignment", {"team": match.group("team").strip()}, clause)
        match = re.search(_REMEMBER, clause, re.IGNORECASE)
        if match and _not_negated(clause, match.start()):
            content = match.group("content").strip().rstrip(",;:")
            add("remember", {"content": content[0].upper() + content[1:]}, clause)
    return intents, set_aside


_LIVE_NOTICE_STATUSES = ("draft", "pending_approval", "approved", "sending", "sent", "failed", "unknown")


def _existing_notice(notices: list[dict]) -> str | None:
    """A live notice of the case in words ("the response notice drafted on 3 May already exists
    (waiting for a supervisor's approval)"), from the context's notices; None when there is none."""
    for notice in notices:
        if str(notice.get("status")) in _LIVE_NOTICE_STATUSES:
            named = str(notice.get("named") or f"the {notice.get('kind') or 'response'} notice")
            return f"{named} already exists ({_plain_notice_status(notice.get('status'))})"
    return None


def _intent_sentence(intent: dict, status: str, available: list[str] | None, notices: list[dict] = ()) -> str:
    kind, payload = intent["kind"], intent["payload"]
    existing = _existing_notice(list(notices)) if kind in ("draft_notice", "send_notice") else None
    if existing:
        return f"{existing[0].upper()}{existing[1:]}, so I will not draft another."
    if kind == "status_transition":
        transition = payload["transition"].replace("_", " ")
        if available is not None and payload["transition"] not in available:
            # context["available_transitions"]: the steps the case's lifecycle allows right now.
            possible = ", ".join(name.replace("_", " ") for name in available) or "none"
            return (f"You asked to {transition} the case, but it is {status or 'in a status'} where that step is not "
                    f"possible (possible now: {possible}).")
        return (f"I am proposing to {transition} the case; that needs approval by {APPROVER}, "
                f"and the case stays {status or 'as it is'} until then.")
    if kind == "risk_level":
        return (f"I am proposing to set the risk level to {payload['risk_level']}; {APPROVER} must "
                "approve it before the case changes.")
    if kind == "draft_notice":
        return (f"I will draft a notice to the consumer and submit it for approval; nothing is sent until "
                f"{NOTICE_APPROVER} approves it.")
    if kind == "send_notice":
        return (f"I will prepare a notice draft and submit it for approval; nothing is sent until "
                f"{NOTICE_APPROVER} approves it.")
    if kind == "assignment":
        return (f"I am proposing to assign the case to {payload['team']}; that needs approval by "
                f"{APPROVER}.")
    return (f"I am proposing to remember: “{payload['content']}”. It takes effect only once it is approved.")


# --- plain words ------------------------------------------------------------------------------
_STATUS_WORDS = {"new": "new (not yet triaged)", "triaged": "triaged", "under_review": "under review",
                 "waiting_for_evidence": "waiting for evidence", "ready_for_decision": "ready for a decision",
                 "decided": "decided", "closed": "closed"}
_NOTICE_WORDS = {"draft": "a draft not yet submitted", "pending_approval": "waiting for a supervisor's approval",
                 "approved": "approved and ready to send", "sending": "being sent", "sent": "sent",
                 "failed": "not sent (sending failed; it can be retried)", "rejected": "rejected",
                 "withdrawn": "withdrawn", "unknown": "of unknown delivery (being checked)"}
_TRANSITION_WORDS = {"triage": "triage the case", "start_review": "start the review",
                     "request_evidence": "ask for more evidence", "receive_evidence": "record that the evidence arrived",
                     "mark_ready": "mark the case ready for a decision", "return_to_review": "return it to review",
                     "decide": "decide the case", "close": "close the case", "reopen": "reopen the case"}
_SIGNAL_WORDS = {"FRAUD-ID": "identity theft", "HARASSMENT": "harassment", "URGENCY": "a time-critical harm",
                 "MONEY-LOSS": "money lost or asked back", "TIME-LIMIT": "a legal time limit",
                 "MISCONDUCT": "alleged misconduct by the company", "REPEAT-CONTACT": "repeated contact",
                 "OLDER-AM": "an older consumer", "SCRA": "a servicemember or veteran"}
_RULE_WORDS = {"ACK-15": "a response to the consumer", "CLOSE-60": "a decision on the case"}


def _plain_status(status: str) -> str:
    return _STATUS_WORDS.get(status, status.replace("_", " ") or "in an unknown status")


def _plain_notice_status(status) -> str:
    return _NOTICE_WORDS.get(str(status or ""), str(status or "of unknown status").replace("_", " "))


def _plain_transition(name) -> str:
    return _TRANSITION_WORDS.get(str(name or ""), "no change for now" if not name else str(name).replace("_", " "))


def _plain_deadline(rule: dict, today) -> str:
    what = _RULE_WORDS.get(str(rule.get("code")), f"rule {rule.get('code')}")
    deadline = parse_date(rule.get("deadline"))
    if deadline is None:
        return f"{what} by {rule.get('deadline')}"
    days = (deadline - today).days
    when = (f"{days} day(s) left" if days > 0 else "due today" if days == 0 else f"{-days} day(s) overdue")
    return f"{what} by {deadline.strftime('%d %B %Y')} ({when})"


# --- answering ------------------------------------------------------------------------------
_TOPICS = (
    ("request", r"\b(?:consumer|customer|complainant|they|he|she)\b[^?]{0,30}\b(?:wants?|asks?|asking|requests?|seeks?|"
                r"looking for|expects?)\b|\bwhat (?:is|was) (?:being )?(?:asked|requested)\b|\bremedy\b|\brequest\b"),
    ("status", r"\bstatus\b|\bstage\b|\bwhere (?:are|is|do)\b|\bversion\b|\bprogress\b|\bstate of\b"),
    ("risk", r"\brisk\w*\b|\bdanger|\bsever\w*|\bpriorit\w*|\burgent\b"),
    ("deadline", r"\bdeadlines?\b|\bdue\b|\bwhen\b|\bhow long\b|\bdays? left\b|\boverdue\b"),
    ("evidence", r"\bevidence\b|\bsummar\w*|\bwhat happened\b|\babout\b|\bcomplain\w*|\bnarrative\b|\bdocuments?\b|\bcite"),
    ("notice", r"\bnotices?\b|\bletters?\b|\backnowledg\w*"),
    ("thread", r"\bwe discussed\b|\bearlier\b|\bso far\b|\bconversation\b|\bthread\b|\brecap\b"),
    ("findings", r"\bfindings?\b|\brecommend\w*|\bnext step|\bshould we\b|\bdisputes?\b|\banalys[ie]s\b|\bproduct\b|\bissue\b|\btriage\b"),
)


def _latest_artifacts(context: dict) -> dict[str, tuple[int | None, dict]]:
    """The newest artifact of each kind of agent output, recognised by its shape."""
    found: dict[str, tuple[int | None, dict]] = {}
    artifacts = [a for a in context.get("artifacts") or [] if isinstance(a, dict)]
    for artifact in sorted(artifacts, key=lambda a: as_int(a.get("id")) or 0):
        content = artifact_content(artifact)
        if "signals" in content and "risk_level" in content:
            shape = "risk"
        elif "rules" in content and "notice_due" in content:
            shape = "policy"
        elif "key_points" in content:
            shape = "evidence"
        elif "recommended_transition" in content:
            shape = "adjudication"
        elif {"product", "issue", "respondent"} <= content.keys():
            shape = "triage"
        else:
            continue
        found[shape] = (as_int(artifact.get("id")), content)
    return found


class _Answer:
    """What the offline chat agent says about one topic of a question, from the case, the latest
    artifacts and the evidence in its context; remembers which artifacts and evidence it used."""

    def __init__(self, context: dict):
        self.context = context
        self.case = case_of(context)
        self.status = str(self.case.get("status") or "")
        self.version = as_int(self.case.get("version"))
        self.reference = self.case.get("reference") or "this case"
        self.artifacts = _latest_artifacts(context)
        self.used_artifacts: list[int] = []
        self.used_evidence: list[int] = []
        self.evidence_titles = {item.id: item.title for item in evidence_of(context) if item.id is not None}

    def use(self, shape: str) -> dict | None:
        if shape not in self.artifacts:
            return None
        artifact_id, content = self.artifacts[shape]
        if artifact_id is not None and artifact_id not in self.used_artifacts:
            self.used_artifacts.append(artifact_id)
        return content

    def source(self, evidence_id) -> str:
        """Evidence named in plain words (its title), its id kept in `cited`."""
        evidence_id = as_int(evidence_id)
        if evidence_id is None:
            return "the case record"
        if evidence_id not in self.used_evidence:
            self.used_evidence.append(evidence_id)
        title = self.evidence_titles.get(evidence_id) or "the evidence"
        return f"“{shorten(title, 60)}”" if title != "the evidence" else title

    def topic_status(self) -> list[str]:
        out: list[str] = []
        out.append(f"{self.reference} is {_plain_status(self.status)}"
                         f"{f' (version {self.version})' if self.version is not None else ''}.")
        return out

    def topic_request(self) -> list[str]:
        out: list[str] = []
        triage_out = self.use("triage") or {}
        request = triage_out.get("consumer_request") if isinstance(triage_out.get("consumer_request"), dict) else None
        if request and request.get("kind") != "none":
            quoted = (f" In their words: “{shorten(str(request['quote']), 300)}” ({self.source(request.get('evidence_id'))})."
                      if request.get("quote") else "")
            out.append(f"The consumer asks for: {request.get('statement')}.{quoted}")
        elif triage_out.get("requested_remedy"):
            out.append(f"The consumer asks for: {shorten(str(triage_out['requested_remedy']), 400)}")
        else:
            out.append("The analysis has not read the consumer's request yet; run the analysis first.")
        return out

    def topic_risk(self) -> list[str]:
        out: list[str] = []
        risk = self.use("risk")
        recorded = self.case.get("risk_level") or "unassessed"
        if risk:
            out.append(f"The latest assessment rates the risk {risk.get('risk_level')} (the case record says "
                             f"{recorded}).")
            reasons = []
            for signal in risk.get("signals") or []:
                if not isinstance(signal, dict):
                    continue
                label = _SIGNAL_WORDS.get(str(signal.get("code")), str(signal.get("code") or "a signal"))
                points = f" (+{signal['points']})" if signal.get("points") else ""
                quote = str(signal.get("quote") or "")
                where = (f": “{shorten(quote, 200)}” ({self.source(signal.get('evidence_id'))})" if quote
                         else f" ({self.source(signal.get('evidence_id'))})")
                reasons.append(f"{label}{points}{where}")
            if reasons:
                out.append("Why: " + "; ".join(reasons) + ".")
                explanation = re.search(r"=\s*\d+ point\(s\)[^.;]*", str(risk.get("rationale") or ""))
                if explanation:
                    out.append(f"Points add up as the published scoring table says ({explanation.group(0)}).")
            else:
                out.append("No risk signal was found in the evidence.")
        else:
            out.append(f"The case record says risk {recorded}; no risk assessment has been run yet.")
        return out

    def topic_deadline(self) -> list[str]:
        out: list[str] = []
        policy = self.use("policy")
        due = [_plain_deadline(r, today_of(self.context)) for r in (policy or {}).get("rules") or []
               if r.get("deadline") and r.get("applies")]
        if due:
            out.append("Due: " + "; ".join(due) + ".")
        elif self.case.get("received_at"):
            out.append(f"The case was received on {self.case['received_at']}; a response to the consumer is due "
                             "within 15 days and a decision within 60 days of receipt.")
        else:
            out.append("The received date is not recorded, so deadlines cannot be computed.")
        return out

    def topic_evidence(self) -> list[str]:
        out: list[str] = []
        summary = self.use("evidence")
        points = (summary or {}).get("key_points") or []
        if points:
            cited = [f"{shorten(str(point.get('text', '')), 200)} ({self.source(point.get('evidence_id'))})"
                     for point in points[:3]]
            out.append("From the evidence: " + " ".join(cited))
        else:
            items = [item for item in evidence_of(self.context) if item.text and item.id is not None][:2]
            if items:
                out.append("From the evidence: " + " ".join(
                    f"{first_sentence(item.text, 200)} ({self.source(item.id)})" for item in items))
            else:
                out.append("There is no evidence on the case yet.")
        return out

    def topic_notice(self) -> list[str]:
        out: list[str] = []
        notices = [n for n in self.context.get("notices") or [] if isinstance(n, dict)]
        policy = self.use("policy")
        if notices:
            out.append("Notices: " + "; ".join(
                f"a {n.get('kind') or 'response'} notice that is {_plain_notice_status(n.get('status'))}"
                for n in notices) + ".")
        elif policy is not None:
            out.append("No notice exists yet. " + ("A response to the consumer is due."
                                                         if policy.get("notice_due") else "None is due now."))
        else:
            out.append("No notice exists for this case yet.")
        return out

    def topic_thread(self) -> list[str]:
        out: list[str] = []
        thread = self.context.get("thread") or {}
        summary = str(thread.get("summary") or "").strip()
        recent = [t for t in thread.get("recent") or [] if isinstance(t, dict) and t.get("role") == "user"]
        if summary:
            out.append("Earlier in this conversation: " + shorten(summary, 600))
        elif recent:
            out.append("Earlier you asked: " + "; ".join(
                first_sentence(str(t.get("content") or ""), 160) for t in recent[-3:]) + ".")
        else:
            out.append("This is the start of the conversation.")
        return out

    def topic_findings(self) -> list[str]:
        out: list[str] = []
        adjudication = self.use("adjudication")
        triage_out = self.use("triage")
        if triage_out and triage_out.get("needs_analyst"):
            out.append(f"Triage is not confident of the product and issue (best guess: "
                             f"{triage_out.get('product')} / {triage_out.get('issue')}); an analyst should "
                             "confirm them.")
        elif triage_out:
            out.append(f"Triage: {triage_out.get('product')} / {triage_out.get('issue')}, against "
                             f"{triage_out.get('respondent')}.")
        if adjudication:
            disputes = [d for d in adjudication.get("disputes") or [] if isinstance(d, dict)]
            step = adjudication.get("recommended_transition")
            out.append(f"The agents recommend: {_plain_transition(step)}."
                             + (" Open points: " + "; ".join(f"{d.get('topic')} — {d.get('resolution')}"
                                                             for d in disputes[:3]) + "." if disputes else ""))
        elif not triage_out:
            if findings := [f for f in self.context.get("findings") or [] if isinstance(f, dict) and f.get("summary")]:
                out.append("Latest findings: " + " ".join(shorten(str(f["summary"]), 200)
                                                                 for f in findings[-3:]))
            else:
                out.append("No analysis has been run on this case yet.")
        return out


def chat(context: dict) -> dict:
    answer = _Answer(context)
    status, version, reference = answer.status, answer.version, answer.reference
    question = str(context.get("question") or "")
    intents, set_aside = detect_intents(question)
    topics = [name for name, pattern in _TOPICS if re.search(pattern, question, re.IGNORECASE)]
    if not topics and not intents:
        topics = ["status", "risk", "findings"]
    sentences: list[str] = []
    for topic in topics:
        sentences += getattr(answer, f"topic_{topic}")()
    available = context.get("available_transitions")
    available = [str(name) for name in available] if isinstance(available, list) else None
    notices = [n for n in context.get("notices") or [] if isinstance(n, dict)]
    sentences += [_intent_sentence(intent, status.replace("_", " "), available, notices) for intent in intents]
    if set_aside or (_APPROVAL_REQUEST.search(question) and not intents):
        sentences.append(f"I cannot approve, send or change anything myself, and instructions to bypass approval "
                         f"are ignored: every change is a proposal that {APPROVER} approves in the review inbox.")
    if _prefers_short(context):
        sentences = sentences[:2] + [s for s in sentences[2:] if s.startswith(("I am proposing", "I will", "I cannot"))]
    text = " ".join(s for s in sentences if s) or f"{reference} is {status or 'in an unknown status'}."
    return {
        "answer": shorten(text, 8000),
        "intents": intents,
        "cited": {"case_status": status or None, "case_version": version,
                  "artifact_ids": sorted(answer.used_artifacts), "evidence_ids": sorted(answer.used_evidence)},
    }


def _prefers_short(context: dict) -> bool:
    for record in context.get("memory") or []:
        text = str(record.get("content") if isinstance(record, dict) else record)
        if re.search(r"\b(?:short|brief|concise)\b", text, re.IGNORECASE):
            return True
    return False


# --- thread summariser ----------------------------------------------------------------------
SUMMARY_LIMIT = 7600
MAX_KEY_FACTS = 30
_DECISION = re.compile(r"\b(?:approved|rejected|decided|agreed|proposal|proposed|proposing|recorded|closed|assigned|sent|"
                       r"withdrawn|will)\b", re.IGNORECASE)


def _turn_text(content: str) -> str:
    kept = [s for s in split_sentences(content) if not is_instruction(s)]
    if len(kept) < len(split_sentences(content)):
        kept.append("[instruction-like text omitted]")
    return " ".join(kept) if kept else shorten(content, 200)


def thread_summarizer(context: dict) -> dict:
    thread = context.get("thread") or {}
    turns = [t for t in thread.get("recent") or [] if isinstance(t, dict) and str(t.get("content") or "").strip()]
    previous = str(thread.get("summary") or "").strip()
    if not turns and not previous:
        return {"summary": "Nothing to summarise: the thread has no turns yet.", "key_facts": []}
    sequences = [as_int(t.get("sequence")) for t in turns if as_int(t.get("sequence")) is not None]
    lines, facts, open_questions = [], [], []
    for position, turn in enumerate(turns):
        role = str(turn.get("role") or "user")
        who = str(turn.get("author") or {"assistant": "Assistant", "user": "User"}.get(role, role.capitalize()))
        label = f"#{turn.get('sequence')}" if turn.get("sequence") is not None else f"turn {position + 1}"
        text = _turn_text(str(turn["content"]))
        if role == "user":
            questions = [s for s in split_sentences(text) if s.endswith("?")]
            lines.append((2, f"{label} {who} asked: {shorten(' '.join(questions) or text, 220)}"))
            intents, _ = detect_intents(text)
            for intent in intents:
                facts.append(f"{label} {who} requested {intent['kind'].replace('_', ' ')}"
                             f"{' ' + str(list(intent['payload'].values())[0]) if intent['payload'] else ''}.")
            if questions and not any(str(t.get("role")) == "assistant" for t in turns[position + 1:]):
                open_questions.append(f"{label} {shorten(' '.join(questions), 200)}")
        else:
            lines.append((1, f"{label} {who}: {first_sentence(text, 200)}"))
            for sentence in split_sentences(text):
                if _DECISION.search(sentence):
                    facts.append(f"{label} {shorten(sentence, 240)}")
                    break
    span = f"#{min(sequences)}–#{max(sequences)}" if sequences else f"{len(turns)} turn(s)"
    header = f"Summary of {len(turns)} turn(s) ({span})."
    parts = [header]
    if previous:
        parts.append("Earlier: " + shorten(previous, 1500))
    if open_questions:
        parts.append("Open questions: " + "; ".join(open_questions[:5]) + ".")
    budget = SUMMARY_LIMIT - sum(len(p) + 1 for p in parts)
    # Keep the user's questions before the assistant's answers when the budget is short.
    kept_indexes, used = set(), 0
    for priority in (2, 1):
        for index, (rank, line) in enumerate(lines):
            if rank == priority and used + len(line) + 1 <= budget:
                kept_indexes.add(index)
                used += len(line) + 1
    kept = [line for index, (_, line) in enumerate(lines) if index in kept_indexes]
    if len(kept) < len(lines):
        kept.append(f"({len(lines) - len(kept)} further turn(s) not itemised.)")
    summary = "\n".join(parts + kept)
    unique_facts = list(dict.fromkeys(shorten(f, 300) for f in facts))
    if len(unique_facts) > MAX_KEY_FACTS:
        unique_facts = unique_facts[-MAX_KEY_FACTS:]  # the latest decisions matter most
    if len(summary) > 8000:  # the budget above keeps it shorter; this is the schema's hard limit
        summary = summary[:7999].rstrip() + "…"
    return {"summary": summary, "key_facts": unique_facts}
