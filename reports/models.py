"""The dashboard's derived tables: facts recomputed from the domain rows by a periodic task
(reports.services.dashboard_refresh). Nothing here is a source of truth; a refresh rebuilds a
tenant's rows from scratch, so running it twice changes nothing."""

from __future__ import annotations

from django.db import models


class DashboardRefresh(models.Model):
    """One row per tenant: when its facts were last rebuilt. The refresh locks this row first, so
    two refreshes of one tenant (beat firing twice, a manual run beside it) take turns."""

    tenant = models.OneToOneField("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    refreshed_at = models.DateTimeField(null=True, blank=True)
    cases = models.PositiveIntegerField(default=0)
    duration_ms = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"dashboard of tenant {self.tenant_id} refreshed at {self.refreshed_at}"


class CaseFact(models.Model):
    """What the dashboard needs of one case, flattened: the dimensions it filters on and the dates
    its service levels are measured from (the first notice sent, the standing decision), which
    would otherwise need the notices and the case events of every case on every page load."""

    case = models.OneToOneField("cases.Case", on_delete=models.CASCADE, primary_key=True, related_name="fact")
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    month = models.DateField(help_text="First day of the month the complaint was received.")
    product = models.CharField(max_length=200, blank=True)
    team = models.CharField(max_length=100, blank=True)
    received_on = models.DateField()
    acknowledge_due = models.DateField(null=True, blank=True)
    close_due = models.DateField(null=True, blank=True)
    acknowledged_on = models.DateField(null=True, blank=True, help_text="When the first notice was sent.")
    decided_on = models.DateField(null=True, blank=True, help_text="The standing decision (settled cases only).")
    days_to_decision = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "month"]),
            models.Index(fields=["tenant", "product", "month"]),
            models.Index(fields=["tenant", "team", "month"]),
        ]

    def __str__(self) -> str:
        return f"facts of case {self.case_id}"


class AgentTally(models.Model):
    """How many of an agent's outputs ended which way, per month of the cases' receipt, product and
    team: proposals by kind and outcome, notices it drafted by outcome, disputes it raised by how
    they were settled."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    month = models.DateField()
    product = models.CharField(max_length=200, blank=True)
    team = models.CharField(max_length=100, blank=True)
    agent = models.CharField(max_length=200)
    subject = models.CharField(max_length=20)  # proposal | notice | dispute
    kind = models.CharField(max_length=40, blank=True)  # the proposal's kind
    outcome = models.CharField(max_length=40)
    count = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["tenant", "month"])]

    def __str__(self) -> str:
        return f"{self.agent} {self.subject} {self.kind} {self.outcome}: {self.count}"


class MonthRollup(models.Model):
    """Per month of receipt, product and team: the service levels and the time to decision, summed
    from CaseFact at the refresh (a missed date is one passed by the refresh's day), so the page sums a
    few hundred rows instead of reading every case."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    month = models.DateField()
    product = models.CharField(max_length=200, blank=True)
    team = models.CharField(max_length=100, blank=True)
    received = models.PositiveIntegerField(default=0)
    acknowledge_met = models.PositiveIntegerField(default=0)
    acknowledge_missed = models.PositiveIntegerField(default=0)
    answer_met = models.PositiveIntegerField(default=0)
    answer_missed = models.PositiveIntegerField(default=0)
    decided = models.PositiveIntegerField(default=0)
    decision_days = models.PositiveIntegerField(default=0, help_text="Days from receipt to decision, summed.")
    decided_0_15 = models.PositiveIntegerField(default=0)
    decided_16_30 = models.PositiveIntegerField(default=0)
    decided_31_60 = models.PositiveIntegerField(default=0)
    decided_61_plus = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["tenant", "month"])]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.product} {self.team}: {self.received}"
