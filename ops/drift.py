"""Drift checks (`manage.py drift_report`): where a projection (an artifact, a run's belief, a memory, a
pending decision, an outbox row) no longer matches the domain.

Registry: CHECKS maps a check name to the dotted path of a function
    check(*, tenant_id: int | None) -> Iterable[DriftFinding | object with .description]
Each app keeps its checks in its own `drift.py` and names them here by path. Paths are imported when
the checks run, so this module (low in the layers) imports none of the apps whose checks it lists.
A result that is not a DriftFinding is wrapped: its `description` is the message and its `*_id`
attributes name the objects involved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.utils.module_loading import import_string

CHECKS: dict[str, str] = {
    # The run engine's (runs/drift.py): what runs recorded against what the cases say now.
    "artifact_risk_vs_case": "runs.drift.check_artifact_risk",
    "notice_believed_sent": "runs.drift.check_notice_belief",
    "memory_vs_domain": "runs.drift.check_memory",
    "old_policy_version": "runs.drift.check_policy_version",
    # Threads (conversations/drift.py): an answer citing a case state the case no longer has.
    "conversation_cited_facts": "conversations.drift.check_conversation_cited_facts",
    # The outbox's (outbox/drift.py): work written but not relayed; beat missing.
    "outbox_backlog": "outbox.drift.check_outbox_backlog",
    "beat_missing": "outbox.drift.check_beat_missing",
    # Notice delivery (cases/drift.py): dispatches asked for but never started, notices whose delivery is unknown.
    "dispatch_requested_not_started": "cases.drift.check_dispatch_requested",
    "notice_unsettled": "cases.drift.check_notice_unsettled",
}


@dataclass(frozen=True)
class DriftFinding:
    check: str
    message: str
    objects: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        objects = f" [{', '.join(self.objects)}]" if self.objects else ""
        return f"{self.check}: {self.message}{objects}"


def normalise(name: str, item) -> DriftFinding:
    if isinstance(item, DriftFinding):
        return item
    objects = [f"{attr[:-3]}:{getattr(item, attr)}" for attr in sorted(vars(item)) if attr.endswith("_id")
               and getattr(item, attr) not in (None, "")]
    return DriftFinding(name, str(getattr(item, "description", item)), objects)


def run_drift_checks(*, tenant_id: int | None = None, only: Iterable[str] | None = None) -> list[DriftFinding]:
    selected = CHECKS if only is None else {name: CHECKS[name] for name in only}
    found: list[DriftFinding] = []
    for name, path in selected.items():
        found.extend(normalise(name, item) for item in import_string(path)(tenant_id=tenant_id))
    return found


__all__ = ["CHECKS", "DriftFinding", "run_drift_checks"]
