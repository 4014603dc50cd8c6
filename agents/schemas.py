"""Pydantic schemas for every model output: an answer that does not validate is retried once, then fails the step. Offline and real providers alike must
return instances of these; anything else fails validation, is retried once with the error, then
fails the step."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agents import taxonomy

RiskLevelName = Literal["low", "medium", "high", "critical"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Citation(_Out):
    text: str = Field(min_length=1, max_length=2000)
    evidence_id: int


def _taxonomy_enum(kind: str) -> dict:
    """JSON-schema enum of the CFPB taxonomy (agents/data/cfpb_taxonomy.json) plus the offline
    analyst's 'Unclassified' sentinel: a real model with structured outputs cannot answer
    anything else, and agents.citations / the triage node check it again after the fact."""
    labels = taxonomy.products() if kind == "product" else taxonomy.issues()
    return {"enum": [*labels, UNCLASSIFIED]}


UNCLASSIFIED = "Unclassified (no narrative to classify)"
RequestKind = Literal["refund", "removal", "correction", "stop_contact", "discharge", "payment_relief",
                      "investigation", "account_access", "other", "none"]


class ConsumerRequest(_Out):
    """What the consumer asks for: a kind, a short statement, and the exact words it rests on."""
    kind: RequestKind
    statement: str = Field(min_length=1, max_length=300)
    quote: str = Field(default="", max_length=1000)  # exact text of the cited evidence ("" when none)
    evidence_id: int | None = None


class TriageOutput(_Out):
    product: str = Field(min_length=1, max_length=200, json_schema_extra=lambda s: s.update(_taxonomy_enum("product")))
    sub_product: str | None = None
    issue: str = Field(min_length=1, max_length=300, json_schema_extra=lambda s: s.update(_taxonomy_enum("issue")))
    respondent: str = Field(min_length=1, max_length=200)
    requested_remedy: str = Field(max_length=1000)  # kept for compatibility: consumer_request.statement + quote
    confidence: float = Field(ge=0, le=1)  # calibrated confidence in the product (and so the issue)
    evidence_refs: list[int] = Field(default_factory=list)
    # Below ARBITER_TRIAGE_MIN_CONFIDENCE: product and issue are a best guess an analyst must confirm;
    # the adjudicator raises a dispute and notices leave product and issue out.
    needs_analyst: bool = False
    issue_confidence: float | None = Field(default=None, ge=0, le=1)
    # What the narrative reads as, when it differs from the product recorded on the case.
    narrative_product: str | None = None
    # What complaints against the respondent are usually about, when the narrative alone reads as
    # another product; `doubt` says so in a sentence, and the adjudicator raises a dispute.
    company_product: str | None = Field(default=None, max_length=200)
    narrative_reading: str | None = Field(default=None, max_length=200)
    doubt: str | None = Field(default=None, max_length=600)
    consumer_request: ConsumerRequest | None = None


class EvidenceSummary(_Out):
    summary: str = Field(min_length=1, max_length=4000)
    key_points: list[Citation] = Field(default_factory=list, max_length=20)
    evidence_refs: list[int] = Field(default_factory=list)


class RiskSignal(_Out):
    code: str = Field(min_length=1, max_length=40)  # e.g. MONEY-LOSS, FRAUD-ID, OLDER-AM, SCRA, HARASSMENT
    description: str = Field(min_length=1, max_length=500)
    evidence_id: int | None = None
    quote: str = Field(default="", max_length=1000)  # exact text of the cited evidence ("" for a case-record fact)
    points: int | None = None  # what the signal adds in the scoring table (analyst/signals.py)


class RiskAssessment(_Out):
    risk_level: RiskLevelName
    rationale: str = Field(min_length=1, max_length=4000)
    signals: list[RiskSignal] = Field(default_factory=list)
    evidence_refs: list[int] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)


class RuleApplication(_Out):
    code: str  # a cases.policy.RULES code
    applies: bool
    reason: str = Field(max_length=1000)
    deadline: str | None = None  # ISO date, when the rule sets one


class PolicyCheck(_Out):
    rules: list[RuleApplication]
    notice_due: bool
    notice_reason: str = Field(max_length=1000)


class Dispute(_Out):
    topic: str = Field(min_length=1, max_length=200)
    positions: list[str] = Field(min_length=2)
    resolution: str = Field(max_length=1000)


class Adjudication(_Out):
    summary: str = Field(min_length=1, max_length=4000)
    risk_level: RiskLevelName
    recommended_transition: str | None = None  # a case transition name, or None
    disputes: list[Dispute] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)


class Reflection(_Out):
    replan: bool
    reason: str = Field(max_length=1000)
    revisit: list[str] = Field(default_factory=list)  # node names to run again


class NoticeDraftOutput(_Out):
    subject: str = Field(min_length=1, max_length=300)
    body: str = Field(min_length=1, max_length=20000)


ChatIntentKind = Literal["status_transition", "risk_level", "assignment", "send_notice", "draft_notice", "remember"]


class ChatIntent(_Out):
    kind: ChatIntentKind
    payload: dict[str, Any] = Field(default_factory=dict)  # {"transition": ...} / {"risk_level": ...} / {"content": ...}
    rationale: str = Field(max_length=1000)


class CitedFacts(_Out):
    case_status: str | None = None
    case_version: int | None = None
    artifact_ids: list[int] = Field(default_factory=list)
    evidence_ids: list[int] = Field(default_factory=list)


class ChatReply(_Out):
    answer: str = Field(min_length=1, max_length=8000)
    intents: list[ChatIntent] = Field(default_factory=list)
    cited: CitedFacts = Field(default_factory=CitedFacts)


class ThreadSummaryOutput(_Out):
    summary: str = Field(min_length=1, max_length=8000)
    key_facts: list[str] = Field(default_factory=list)
