"""Drift check (registered in ops.drift.CHECKS): an assistant answer that cites a case status or version the case no
longer has.

Only the latest citing answer of each thread is checked: it is what the thread currently
"believes" about the case. Earlier answers are history, superseded by later ones; flagging every
old answer after each change would bury the one that matters. The check is one SQL query (a
correlated subquery picks each thread's latest citing answer), whatever the number of messages."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F, OuterRef, Q, Subquery

from conversations.models import Message, MessageRole
from ops.drift import DriftFinding

CHECK_NAME = "conversation_cited_facts"


@dataclass(frozen=True)
class CitedFactDrift:
    message_id: int
    thread_id: int
    sequence: int
    case_id: int
    case_reference: str
    cited_status: str
    cited_version: int | None
    case_status: str
    case_version: int
    run_id: str

    @property
    def description(self) -> str:
        return (f"Thread {self.thread_id} message #{self.sequence} (run {self.run_id or '—'}) cites "
                f"{self.case_reference} as {self.cited_status or '?'} at version {self.cited_version}; the case "
                f"is now {self.case_status} at version {self.case_version}.")


def cited_fact_drift(*, tenant_id: int | None = None, thread_id: int | None = None) -> list[CitedFactDrift]:
    citing = Message.objects.filter(role=MessageRole.ASSISTANT, cited_case_version__isnull=False)
    latest_per_thread = (citing.filter(thread=OuterRef("thread")).order_by("-sequence").values("sequence")[:1])
    qs = (citing.filter(thread__case__isnull=False)
          .annotate(latest_sequence=Subquery(latest_per_thread))
          .filter(sequence=F("latest_sequence"))
          .filter(~Q(cited_case_version=F("thread__case__version"))
                  | ~Q(cited_case_status=F("thread__case__status"))))
    if tenant_id is not None:
        qs = qs.filter(tenant_id=tenant_id)
    if thread_id is not None:
        qs = qs.filter(thread_id=thread_id)
    rows = qs.order_by("thread_id").values_list(
        "pk", "thread_id", "sequence", "thread__case_id", "thread__case__reference", "cited_case_status",
        "cited_case_version", "thread__case__status", "thread__case__version", "run_id")
    return [CitedFactDrift(*row) for row in rows]


def check_conversation_cited_facts(*, tenant_id: int | None = None) -> list[DriftFinding]:
    """The drift report's check: every thread whose latest citing answer no longer matches its case."""
    return [DriftFinding(CHECK_NAME, item.description,
                         [f"message:{item.message_id}", f"thread:{item.thread_id}", f"case:{item.case_reference}"]
                         + ([f"run:{item.run_id}"] if item.run_id else []))
            for item in cited_fact_drift(tenant_id=tenant_id)]
