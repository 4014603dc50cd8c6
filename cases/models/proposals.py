"""Proposals: what an agent or a person proposes to change on a case, for a person to decide."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from cases.models.base import ThreadSafeRefreshMixin
from cases.models.case import Case
from cases.models.choices import PRECONDITION_LABELS, ProposalKind, ProposalStatus


class Proposal(ThreadSafeRefreshMixin, ConcurrentTransitionMixin, models.Model):
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="proposals")
    kind = models.CharField(max_length=30, choices=ProposalKind.choices)
    # status_transition: {"transition": "mark_ready"}; risk_level: {"risk_level": "high"};
    # assignment: {"team": "...", "assignee_id": 3 | null}
    payload = models.JSONField()
    rationale = models.TextField()
    evidence_refs = models.JSONField(default=list, blank=True)
    proposer_type = models.CharField(max_length=20)
    proposer_id = models.CharField(max_length=200)
    proposed_by_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True,
                                         blank=True, related_name="+")
    # The person on whose request an agent proposed (e.g. a chat "close the case"): they are
    # barred from approving it too, or asking an agent would be a way around four eyes.
    requested_by = models.CharField(max_length=200, blank=True)
    run_id = models.CharField(max_length=64, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    case_version = models.PositiveIntegerField()
    # What the proposal depends on (ADR 0006): the case fields it reads or writes with
    # their values when it was made, e.g. {"status": "triaged"} or {"risk_level": "unassessed"}.
    # Approval re-checks only these; see cases.services.proposals.
    preconditions = models.JSONField(default=dict, blank=True)
    # Why it went stale: {"field", "from", "to", "event_id", "event_sequence", "event_type", "actor_id"}.
    stale_reason = models.JSONField(default=dict, blank=True)
    policy_version = models.CharField(max_length=40)
    status = FSMField(max_length=20, choices=ProposalStatus.choices, default=ProposalStatus.PENDING,
                      protected=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "idempotency_key"], name="proposal_idempotency_unique",
                                    condition=models.Q(idempotency_key__isnull=False)),
        ]
        indexes = [models.Index(fields=["tenant", "status"])]

    def __str__(self) -> str:
        return f"P{self.pk} {self.summary}"

    @property
    def is_stale(self) -> bool:
        return self.status == ProposalStatus.STALE

    def changed_preconditions(self, case: Case) -> list[tuple[str, object, object]]:
        """(field, value when proposed, value now) for each precondition the case no longer meets."""
        return [(name, expected, getattr(case, name)) for name, expected in (self.preconditions or {}).items()
                if getattr(case, name) != expected]

    @property
    def stale_message(self) -> str:
        """Why this proposal is stale, in words (empty when it is not)."""
        reason = self.stale_reason or {}
        if not reason:
            return ""
        label = PRECONDITION_LABELS.get(reason.get("field"), reason.get("field"))
        by = f" by event #{reason['event_sequence']} ({reason.get('event_type')})" if reason.get("event_sequence") else ""
        return (f"The {label} changed from {reason.get('from') or '—'} to {reason.get('to') or '—'}{by} after this "
                f"proposal was made; it assumed {reason.get('from') or '—'}.")

    @property
    def summary(self) -> str:
        if self.kind == ProposalKind.STATUS_TRANSITION:
            return f"transition: {self.payload.get('transition')}"
        if self.kind == ProposalKind.RISK_LEVEL:
            return f"risk level → {self.payload.get('risk_level')}"
        return f"assign to {self.payload.get('team') or '—'} / user {self.payload.get('assignee_id') or '—'}"

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.APPLIED)
    def apply(self):
        pass

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.REJECTED)
    def reject(self):
        pass

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.WITHDRAWN)
    def withdraw(self):
        pass

    @transition(field=status, source=ProposalStatus.PENDING, target=ProposalStatus.STALE)
    def mark_stale(self):
        pass
