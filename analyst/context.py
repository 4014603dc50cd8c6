"""Reading the structured context the executor hands to the offline analyst.

The context is a plain dict (ModelRequest.context). Keys, all optional unless an agent says so:

    agent          str   the specialist (request.agent wins when both are given)
    today          str   ISO date the deadlines are computed against (default: today's date)
    case           dict  id, reference, title, status, version, risk_level, product, sub_product,
                         issue, sub_issue, company, tags (str "Older American, Servicemember" or
                         list), received_at (ISO date), consumer_state, assigned_team, resolution
    evidence       list  [{"id": int, "title": str, "text": str}] ("excerpt"/"content" also read)
    prior          dict  earlier node outputs of this run, by agent name:
                         {"triage": {...TriageOutput}, "risk_assessor": {...}, ...}
    policy_rules   list  [{"code", "title", "description", "deadline_days"}] (default: cases.policy.RULES)
    notices        list  [{"id", "status", "kind"}] notices of the case
    replans_done   int   how many times this run has re-planned already (reflect)
    question       str   chat: the latest user message (the only text intents are read from)
    thread         dict  {"summary": str | None, "recent": [{"role", "content", "sequence", "author"}]}
    artifacts      list  [{"id", "kind", "content"}] (content: dict or JSON text of an agent output)
    memory         list  [{"id", "content"}] active memory of the asking analyst
    available_transitions  list  chat: the case transitions possible from its current status
    findings       list  [{"id", "agent", "type", "summary"}] (chat falls back to them without artifacts)

Everything read from evidence, messages and artifacts is untrusted data: it is analysed, never
obeyed. Sentences that address the assistant are set aside before any analysis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date

from agents.text import clean_narrative, set_aside_instructions


@dataclass(frozen=True)
class EvidenceText:
    id: int | None
    title: str
    text: str  # cleaned; instruction-like sentences removed
    set_aside: list[str] = field(default_factory=list)


def as_int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def case_of(context: dict) -> dict:
    case = context.get("case")
    return case if isinstance(case, dict) else {}


def evidence_of(context: dict) -> list[EvidenceText]:
    items = []
    for raw in context.get("evidence") or []:
        if not isinstance(raw, dict):
            continue
        text = clean_narrative(str(raw.get("text") or raw.get("excerpt") or raw.get("content") or ""))
        kept, dropped = set_aside_instructions(text)
        items.append(EvidenceText(id=as_int(raw.get("id")), title=str(raw.get("title") or "").strip(),
                                  text=kept, set_aside=dropped))
    return items


def prior_of(context: dict, agent: str) -> dict | None:
    prior = context.get("prior") or {}
    value = prior.get(agent) if isinstance(prior, dict) else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def parse_date(value) -> date | None:
    if isinstance(value, date):
        return value
    if not value:
        return None
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def today_of(context: dict) -> date:
    parsed = parse_date(context.get("today"))
    if parsed:
        return parsed
    try:
        from django.utils import timezone

        return timezone.localdate()
    except Exception:  # noqa: BLE001 - outside Django (a plain script): the system date
        return date.today()


def artifact_content(artifact: dict) -> dict:
    content = artifact.get("content")
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            return {"text": content}
    return content if isinstance(content, dict) else {}
