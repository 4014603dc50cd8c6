"""The dashboard's only writes: rebuilding a tenant's facts (CaseFact, AgentTally) from the domain
rows. Derived data, not a domain change: no case event and no audit event (the numbers can always
be recomputed from what the ledger records)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import date

from django.db import transaction
from django.db.models import Count, F, Min, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.models import Tenant
from cases.models import SETTLED_STATUSES, Case, CaseEvent, Notice, NoticeStatus, Proposal
from reports.filters import DECISION_BUCKETS, SLA_MEASURES, decision_condition, sla_condition
from reports.models import AgentTally, CaseFact, DashboardRefresh, MonthRollup
from reports.outcomes import AGENT_PREFIX, dispute_outcome, notice_outcome
from runs.models import Artifact

BATCH_SIZE = 2000


@transaction.atomic
def dashboard_refresh(*, tenant_id: int, today: date | None = None) -> DashboardRefresh:
    """Rebuild the tenant's dashboard facts from its cases, notices, case events, proposals and
    dispute artifacts, in one transaction: a reader sees the old facts or the new, never half.

    Locks the tenant's DashboardRefresh row first (lock order: "other rows a service owns"), so a
    second refresh of the same tenant waits and then rebuilds again — the result is the same.
    Takes no lock on a domain row: inserting facts only key-shares the cases they point at, which
    never waits on a case service's FOR NO KEY UPDATE."""
    started = time.monotonic()
    DashboardRefresh.objects.get_or_create(tenant_id=tenant_id)
    refresh = DashboardRefresh.objects.select_for_update().get(tenant_id=tenant_id)
    CaseFact.objects.filter(tenant_id=tenant_id).delete()
    written = 0
    for batch in _batched(_case_facts(tenant_id)):
        CaseFact.objects.bulk_create(batch)
        written += len(batch)
    MonthRollup.objects.filter(tenant_id=tenant_id).delete()
    MonthRollup.objects.bulk_create(_month_rollups(tenant_id, today or timezone.localdate()), batch_size=BATCH_SIZE)
    AgentTally.objects.filter(tenant_id=tenant_id).delete()
    AgentTally.objects.bulk_create(_agent_tallies(tenant_id), batch_size=BATCH_SIZE)
    refresh.refreshed_at = timezone.now()
    refresh.cases = written
    refresh.duration_ms = int((time.monotonic() - started) * 1000)
    refresh.save(update_fields=["refreshed_at", "cases", "duration_ms"])
    return refresh


def dashboard_refresh_all() -> int:
    """Refresh every tenant's facts, each in its own transaction. Returns how many tenants."""
    tenant_ids = list(Tenant.objects.order_by("pk").values_list("pk", flat=True))
    for tenant_id in tenant_ids:
        dashboard_refresh(tenant_id=tenant_id)
    return len(tenant_ids)


def _batched(facts: Iterator[CaseFact]) -> Iterator[list[CaseFact]]:
    batch = []
    for fact in facts:
        batch.append(fact)
        if len(batch) >= BATCH_SIZE:
            yield batch
            batch = []
    if batch:
        yield batch


def _local_date(moment) -> date | None:
    return timezone.localdate(moment) if moment is not None else None


def _case_facts(tenant_id: int) -> Iterator[CaseFact]:
    first_sent = (Notice.objects.filter(case=OuterRef("pk"), status=NoticeStatus.SENT).order_by()
                  .values("case").annotate(first=Min("sent_at")).values("first"))
    # The standing decision: the latest "decide" transition (a reopened and decided-again case is
    # measured to its last decision); only settled cases have one.
    decided = (CaseEvent.objects.filter(case=OuterRef("pk"), event_type="case.transitioned",
                                        payload__transition="decide").order_by("-sequence").values("created_at")[:1])
    rows = (Case.objects.filter(tenant_id=tenant_id).order_by("pk")
            .annotate(first_sent=Subquery(first_sent), decided=Subquery(decided))
            .values_list("pk", "product", "assigned_team", "received_at", "created_at", "status",
                         "acknowledge_due", "close_due", "first_sent", "decided"))
    for (pk, product, team, received_at, created_at, status, acknowledge_due, close_due, first_sent,
         decided_at) in rows.iterator(chunk_size=BATCH_SIZE):
        received_on = received_at or _local_date(created_at)
        decided_on = _local_date(decided_at) if status in SETTLED_STATUSES else None
        yield CaseFact(case_id=pk, tenant_id=tenant_id, month=received_on.replace(day=1), product=product,
                       team=team, received_on=received_on, acknowledge_due=acknowledge_due, close_due=close_due,
                       acknowledged_on=_local_date(first_sent), decided_on=decided_on,
                       days_to_decision=max(0, (decided_on - received_on).days) if decided_on else None)


def _month_rollups(tenant_id: int, today: date) -> list[MonthRollup]:
    """CaseFact summed per month, product and team, with the conditions the queue's links use."""
    sums = {"received": Count("pk"), "decided": Count("pk", filter=Q(days_to_decision__isnull=False)),
            "decision_days": Coalesce(Sum("days_to_decision"), 0)}
    for measure in SLA_MEASURES:
        sums[f"{measure}_met"] = Count("pk", filter=sla_condition(measure=measure, met=True, today=today))
        sums[f"{measure}_missed"] = Count("pk", filter=sla_condition(measure=measure, met=False, today=today))
    for key, _label, _low, _high, field in DECISION_BUCKETS:
        sums[field] = Count("pk", filter=decision_condition(key))
    rows = CaseFact.objects.filter(tenant_id=tenant_id).order_by().values("month", "product", "team").annotate(**sums)
    return [MonthRollup(tenant_id=tenant_id, **row) for row in rows]


def _agent_tallies(tenant_id: int) -> list[AgentTally]:
    """Counted through the facts just written, so each output is filed under its case's month,
    product and team."""
    dimensions = {"month": F("case__fact__month"), "product": F("case__fact__product"),
                  "team": F("case__fact__team")}
    proposals = (Proposal.objects.filter(tenant_id=tenant_id, proposer_type="agent").order_by()
                 .values(**dimensions, agent=F("proposer_id"), kind_=F("kind"), outcome=F("status"))
                 .annotate(n=Count("pk")))
    notices = (Notice.objects.filter(tenant_id=tenant_id, drafted_by__startswith=AGENT_PREFIX).order_by()
               .annotate(outcome_=notice_outcome())
               .values(**dimensions, agent=F("drafted_by"), outcome=F("outcome_")).annotate(n=Count("pk")))
    disputes = (Artifact.objects.filter(tenant_id=tenant_id, kind="dispute", case__isnull=False,
                                        produced_by__startswith=AGENT_PREFIX).order_by()
                .annotate(outcome_=dispute_outcome())
                .values(**dimensions, agent=F("produced_by"), outcome=F("outcome_")).annotate(n=Count("pk")))
    tallies = []
    for subject, rows in (("proposal", proposals), ("notice", notices), ("dispute", disputes)):
        for row in rows:
            tallies.append(AgentTally(tenant_id=tenant_id, month=row["month"], product=row["product"],
                                      team=row["team"], agent=row["agent"], subject=subject,
                                      kind=row.get("kind_", ""), outcome=row["outcome"], count=row["n"]))
    return tallies
