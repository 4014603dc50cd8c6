"""Pydantic schemas for every model output (DESIGN §5). Offline and real providers alike must
return instances of these; anything else fails validation, is retried once with the error, then
fails the step."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RiskLevelName = Literal["low", "medium", "high", "critical"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Citation(_Out):
    text: str = Field(min_length=1, max_length=2000)
    evidence_id: int


class TriageOutput(_Out):
    product: str = Field(min_length=1, max_length=200)
    sub_product: str | None = None
    issue: str = Field(min_length=1, max_length=300)
    respondent: str = Field(min_length=1, max_length=200)
    requested_remedy: str = Field(max_length=1000)
    confidence: float = Field(ge=0, le=1)
    evidence_refs: list[int] = Field(default_factory=list)


class EvidenceSummary(_Out):
    summary: str = Field(min_length=1, max_length=4000)
    key_points: list[Citation] = Field(default_factory=list, max_length=20)
    evidence_refs: list[int] = Field(default_factory=list)


class RiskSignal(_Out):
    code: str = Field(min_length=1, max_length=40)  # e.g. MONEY-LOSS, FRAUD-ID, OLDER-AM, SCRA, REPEAT-CONTACT
    description: str = Field(min_length=1, max_length=500)
    evidence_id: int | None = None


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


ChatIntentKind = Literal["status_transition", "risk_level", "assignment", "send_notice", "remember"]


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
