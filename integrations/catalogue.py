"""The event catalogue: every change an integrator mirrors, as one event type each (ADR 0028).

Each type names the audit actions it comes from, so an event is written in the transaction of
the change by the audit listener (integrations.events.capture), and carries a description and
an example payload. The API serves the catalogue at `/api/v1/event-types/` and the OpenAPI
schema shows each example on the feed; the README lists the same table.

Two former umbrella types are kept for subscriptions and feed filters made before the catalogue
was complete: an endpoint subscribed to `case.changed` receives every `case.*` type, one
subscribed to `proposal.decided` receives `proposal.approved` and `proposal.rejected`, and one
subscribed to `run.finished` still receives failures (now `run.failed`), as it did before.
No new event carries a deprecated type."""

from __future__ import annotations

from dataclasses import dataclass

from integrations.models import EventType


@dataclass(frozen=True)
class EventSpec:
    type: str
    description: str
    actions: tuple[str, ...]
    target_type: str
    object_url: str | None
    deprecated: bool = False


_CASE_URL, _PROPOSAL_URL, _NOTICE_URL = "/api/v1/cases/CASE-2026-000042/", "/api/v1/proposals/31/", "/api/v1/notices/17/"
_RUN_URL, _EVIDENCE_URL = "/api/v1/runs/88/", "/api/v1/evidence/55/download/"

CATALOGUE: tuple[EventSpec, ...] = (
    EventSpec(EventType.CASE_CREATED, "A case was opened (its complaint text follows as evidence.added).",
              ("cases.case.created",), "case", _CASE_URL),
    EventSpec(EventType.CASE_UPDATED, "A case field other than its status or assignee changed: its risk level, "
              "or its due dates (intake policy change, pause, resume, extension).",
              ("cases.case.risk_changed", "cases.case.deadlines_changed"), "case", _CASE_URL),
    EventSpec(EventType.CASE_TRANSITIONED, "A case moved to another status (triaged, under review, decided, ...).",
              ("cases.case.transitioned",), "case", _CASE_URL),
    EventSpec(EventType.CASE_ASSIGNED, "A case was taken by, or assigned to, a person.",
              ("cases.case.assigned",), "case", _CASE_URL),
    EventSpec(EventType.EVIDENCE_ADDED, "Evidence (text or a file) was added to a case.",
              ("cases.evidence.added",), "evidence", _EVIDENCE_URL),
    EventSpec(EventType.EVIDENCE_EXTRACTED, "The text of a PDF evidence was extracted (or the extraction ended "
              "without text).", ("cases.evidence.extracted",), "evidence", _EVIDENCE_URL),
    EventSpec(EventType.PROPOSAL_CREATED, "An agent or a person proposed a change to a case.",
              ("cases.proposal.created",), "proposal", _PROPOSAL_URL),
    EventSpec(EventType.PROPOSAL_APPROVED, "A supervisor approved a proposal; its change is applied.",
              ("cases.proposal.approved",), "proposal", _PROPOSAL_URL),
    EventSpec(EventType.PROPOSAL_REJECTED, "A supervisor rejected a proposal.",
              ("cases.proposal.rejected",), "proposal", _PROPOSAL_URL),
    EventSpec(EventType.PROPOSAL_STALED, "A proposal became stale: a case field it depended on changed.",
              ("cases.proposal.staled",), "proposal", _PROPOSAL_URL),
    EventSpec(EventType.PROPOSAL_WITHDRAWN, "A proposal was withdrawn by whoever made it.",
              ("cases.proposal.withdrawn",), "proposal", _PROPOSAL_URL),
    EventSpec(EventType.NOTICE_DRAFTED, "A notice to the consumer was drafted.",
              ("cases.notice.drafted",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_SUBMITTED, "A notice was submitted for approval.",
              ("cases.notice.submitted",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_APPROVED, "A supervisor approved a notice's exact content.",
              ("cases.notice.approved",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_REJECTED, "A supervisor rejected a notice; it goes back to draft.",
              ("cases.notice.rejected",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_WITHDRAWN, "A notice was withdrawn before it was sent.",
              ("cases.notice.withdrawn",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_DISPATCHED, "The sender claimed an approved notice and is sending it.",
              ("cases.notice.dispatch_started",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_SENT, "The email server accepted the notice.",
              ("cases.notice.sent",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_FAILED, "Sending failed and the notice certainly did not leave; it may be retried.",
              ("cases.notice.dispatch_failed",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_UNKNOWN, "The notice may have left but no final answer came back; an operator "
              "or the delivery webhook settles it.", ("cases.notice.dispatch_unknown",), "notice", _NOTICE_URL),
    EventSpec(EventType.NOTICE_SETTLED, "An operator or the email provider settled an unknown or stuck notice "
              "as sent or failed.", ("cases.notice.settled",), "notice", _NOTICE_URL),
    EventSpec(EventType.RUN_STARTED, "An agent run was started.", ("runs.run.started",), "run", _RUN_URL),
    EventSpec(EventType.RUN_FINISHED, "An agent run ended: completed, or cancelled (see data.decision).",
              ("runs.run.completed", "runs.run.cancelled"), "run", _RUN_URL),
    EventSpec(EventType.RUN_FAILED, "An agent run failed (a budget, an invalid answer, an error).",
              ("runs.run.failed",), "run", _RUN_URL),
    EventSpec(EventType.DEADLINE_CROSSED, "A due date of a case became due soon or overdue (once per due date "
              "and state).", ("cases.deadline.due_soon", "cases.deadline.overdue"), "case", _CASE_URL),
    EventSpec(EventType.PING, "A test event sent on request (POST /api/v1/webhooks/{id}/ping/) to one endpoint "
              "only; never in the feed (its sequence is null) and not subscribable.", (), "webhookendpoint", None),
    EventSpec(EventType.CASE_CHANGED, "Deprecated: subscribe to case.created, case.updated, case.transitioned "
              "and case.assigned. A subscription to it receives all four.", (), "case", _CASE_URL, deprecated=True),
    EventSpec(EventType.PROPOSAL_DECIDED, "Deprecated: subscribe to proposal.approved and proposal.rejected. "
              "A subscription to it receives both.", (), "proposal", _PROPOSAL_URL, deprecated=True),
)

BY_TYPE: dict[str, EventSpec] = {spec.type: spec for spec in CATALOGUE}
_BY_ACTION: dict[str, str] = {action: spec.type for spec in CATALOGUE for action in spec.actions}

# A current type -> the former types whose subscribers and feed filters still receive it.
FORMERLY: dict[str, tuple[str, ...]] = {
    EventType.CASE_CREATED: (EventType.CASE_CHANGED,), EventType.CASE_UPDATED: (EventType.CASE_CHANGED,),
    EventType.CASE_TRANSITIONED: (EventType.CASE_CHANGED,), EventType.CASE_ASSIGNED: (EventType.CASE_CHANGED,),
    EventType.PROPOSAL_APPROVED: (EventType.PROPOSAL_DECIDED,),
    EventType.PROPOSAL_REJECTED: (EventType.PROPOSAL_DECIDED,),
    EventType.RUN_FAILED: (EventType.RUN_FINISHED,),
}


def event_type_for(action: str) -> str | None:
    """The event type an audit action is, or None. A case action not listed (a field added later)
    is a case update rather than a change nobody mirrors."""
    if action in _BY_ACTION:
        return _BY_ACTION[action]
    if action.startswith("cases.case."):
        return EventType.CASE_UPDATED
    return None


def is_subscribed(kind: str, subscribed: list[str] | tuple[str, ...]) -> bool:
    """Whether an endpoint subscribed to `subscribed` receives an event of type `kind`."""
    return kind in subscribed or any(former in subscribed for former in FORMERLY.get(kind, ()))


def types_matching(kind: str) -> list[str]:
    """The stored types a feed filter `type=<kind>` returns: the type itself, and for a former
    umbrella type every type it now stands for (plus its own rows written before the change)."""
    return [kind, *sorted(current for current, formers in FORMERLY.items() if kind in formers)]


def example_data(spec: EventSpec) -> dict:
    """The `data` of an example event of this type, with the keys every event's data has."""
    target_ids = {"case": "12", "evidence": "55", "proposal": "31", "notice": "17", "run": "88", "webhookendpoint": "3"}
    # ping is written by webhook_ping itself, not from an audit action (so the audit listener never
    # makes a second one, and it never enters the feed); its example names the action it records.
    action = spec.actions[0] if spec.actions else (
        "integrations.webhook.pinged" if spec.type == EventType.PING else "cases.case.transitioned")
    actor = "agent:analyst@1" if spec.type in (EventType.PROPOSAL_CREATED, EventType.RUN_FAILED) else "user:7"
    if spec.type in (EventType.DEADLINE_CROSSED, EventType.NOTICE_DISPATCHED, EventType.NOTICE_SENT,
                     EventType.NOTICE_FAILED, EventType.NOTICE_UNKNOWN, EventType.RUN_FINISHED):
        actor = "system:worker"
    return {"action": action, "actor": actor, "decision": "", "target_type": spec.target_type,
            "target_id": target_ids[spec.target_type], "case": None if spec.type == EventType.PING else "CASE-2026-000042",
            "run_id": 88 if spec.target_type == "run" else None, "object_url": spec.object_url,
            "audit_event_id": 4711}


def example_event(spec: EventSpec) -> dict:
    """A whole example event, as the feed lists it and a webhook posts it."""
    return {"id": "evt_1042", "sequence": 1042, "type": spec.type, "occurred_at": "2026-11-27T06:50:00Z",
            "tenant": "acme", "data": example_data(spec)}


def catalogue_entries() -> list[dict]:
    """The catalogue as the API serves it."""
    return [{"type": spec.type, "description": spec.description, "deprecated": spec.deprecated,
             "audit_actions": list(spec.actions),
             "also_for_subscribers_of": list(FORMERLY.get(spec.type, ())),
             "example": example_event(spec)} for spec in CATALOGUE]
