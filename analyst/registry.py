"""The offline analyst: a deterministic, network-free model behind every agent (the default provider).

`answer(agent, context)` returns the JSON-ready dict an agent's output schema expects;
analyst.provider.OfflineAnalyst wraps it as a Provider. See context.py for the context keys
each agent reads, signals.py for the risk scoring table, classifier.py for the product/issue model
(calibrated; cues.py and taxonomy.py), triage.py for triage and the consumer's request.
"""

from agents.schemas import (
    Adjudication,
    ChatReply,
    EvidenceSummary,
    NoticeDraftOutput,
    PolicyCheck,
    Reflection,
    RiskAssessment,
    ThreadSummaryOutput,
    TriageOutput,
)
from analyst.agents import (
    adjudicator,
    evidence_analyst,
    notice_drafter,
    policy_checker,
    reflect,
    risk_assessor,
    triage,
)
from analyst.chat import chat, thread_summarizer

# agent name -> (the function answering it, the output schema it answers with)
AGENTS = {
    "triage": (triage, TriageOutput),
    "evidence_analyst": (evidence_analyst, EvidenceSummary),
    "risk_assessor": (risk_assessor, RiskAssessment),
    "policy_checker": (policy_checker, PolicyCheck),
    "adjudicator": (adjudicator, Adjudication),
    "reflect": (reflect, Reflection),
    "notice_drafter": (notice_drafter, NoticeDraftOutput),
    "chat": (chat, ChatReply),
    "thread_summarizer": (thread_summarizer, ThreadSummaryOutput),
}

__all__ = ["AGENTS"]
