"""Deadline rules per tenant (versioned) and the crossings of due dates recorded once each."""

from __future__ import annotations

from django.db import models

from cases.models.case import Case, CaseEvent
from cases.models.choices import DayCount


class DeadlinePolicy(models.Model):
    """A tenant's deadline rules, versioned: a change is a new row with the next version (rows are
    never edited), so each case names the version its due dates were computed under. Defaults
    follow CFPB practice: the company responds within 15 days, the final response within 60."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    version = models.PositiveIntegerField()
    country = models.CharField(max_length=2, default="US", help_text="ISO country code for public holidays.")
    subdivision = models.CharField(max_length=10, blank=True, help_text="State/province code, e.g. CA (optional).")
    acknowledge_days = models.PositiveIntegerField(default=15)
    acknowledge_day_count = models.CharField(max_length=10, choices=DayCount.choices, default=DayCount.CALENDAR)
    response_days = models.PositiveIntegerField(default=15)
    response_day_count = models.CharField(max_length=10, choices=DayCount.choices, default=DayCount.CALENDAR)
    close_days = models.PositiveIntegerField(default=60)
    close_day_count = models.CharField(max_length=10, choices=DayCount.choices, default=DayCount.CALENDAR)
    due_soon_days = models.PositiveIntegerField(default=3, help_text="A due date this close is 'due soon'.")
    pause_while_waiting_for_evidence = models.BooleanField(
        default=False, help_text="Stop the clock while the case waits for evidence; due dates move on by the pause.")
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant_id", "-version"]
        verbose_name_plural = "deadline policies"
        constraints = [models.UniqueConstraint(fields=["tenant", "version"], name="deadline_policy_version_unique")]

    def __str__(self) -> str:
        return f"deadline policy v{self.version} ({self.tenant_id})"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValueError("Deadline policies are versioned: create a new version instead of editing one.")
        super().save(*args, **kwargs)


class DeadlineCrossing(models.Model):
    """A due date crossing into 'due soon' or 'overdue', recorded once (the unique constraint is
    what makes the beat task idempotent). A moved due date is a new crossing."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.PROTECT, related_name="+")
    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="deadline_crossings")
    deadline = models.CharField(max_length=20)  # acknowledge / response / close
    state = models.CharField(max_length=20)  # due_soon / overdue
    due = models.DateField()
    event = models.ForeignKey(CaseEvent, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["case", "deadline", "state", "due"],
                                               name="deadline_crossing_once")]

    def __str__(self) -> str:
        return f"{self.case_id} {self.deadline} {self.state} {self.due}"
