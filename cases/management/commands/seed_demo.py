"""`manage.py seed_demo`: two tenants, a user for each role, and cases built from real CFPB
complaints (cases/demo_data/), some of them moved along their lifecycle.

A working day: each case is dated so that its next due date falls in a realistic mix (about one
case in five overdue, three in ten due this week, the rest later; the decided and closed ones are
done), and every analyst owns cases (`analyst`, `analyst_b`, `analyst2`; one case in five is left
unassigned for someone to take). The received dates are set relative to today for that mix: the
CFPB export's own dates are months or years old and would make every case overdue.

Idempotent: tenants are found by slug, users by username and cases by (tenant, source,
source_reference), so a second run creates nothing. Cases are opened and moved ONLY through
cases.services, exactly as a person would, so every one has its events and audit trail. A case and
its little story are one transaction: a run interrupted half-way never leaves a case half-told
that the next run would then skip."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from django.db import transaction

from accounts.models import Tenant, User
from cases.deadlines import compute_due_dates
from cases.models import Case
from cases.services import (
    case_create,
    case_take,
    case_transition,
    notice_approve,
    notice_draft,
    notice_submit,
    proposal_approve,
    proposal_create,
)
from cases.services.deadlines import deadline_policy_current
from core.commands import DatabaseCommand

DEMO_DATA = Path(__file__).resolve().parents[2] / "demo_data" / "cfpb_complaints_sample.csv"
DEFAULT_PASSWORD = "arbiter-demo"
SOURCE = "CFPB"


@dataclass(frozen=True)
class DemoTenant:
    slug: str
    name: str


@dataclass(frozen=True)
class DemoUser:
    username: str
    tenant: str  # slug
    role: str
    what: str  # one line for the login table
    is_staff: bool = False
    is_superuser: bool = False


TENANTS = (
    DemoTenant("acme", "Acme Consumer Affairs"),
    DemoTenant("northwind", "Northwind Regulator"),
)

USERS = (
    DemoUser("analyst", "acme", "analyst", "opens and works cases, drafts notices, proposes changes"),
    DemoUser("analyst_b", "acme", "analyst", "a second analyst (four eyes between analysts)"),
    DemoUser("supervisor", "acme", "supervisor",
             "approves proposals and notices, decides and closes cases; Django admin scoped to acme",
             is_staff=True),
    DemoUser("auditor", "acme", "auditor", "read-only, sees the audit trail"),
    DemoUser("admin", "acme", "admin", "operations: Django admin at /admin/ (superuser)",
             is_staff=True, is_superuser=True),
    DemoUser("analyst2", "northwind", "analyst", "analyst of the second tenant (sees none of acme's cases)"),
    DemoUser("supervisor2", "northwind", "supervisor", "supervisor of the second tenant"),
)

# Every fifth complaint goes to the second tenant, the rest to the first.
SECOND_TENANT_EVERY = 5

# Position of a case among its tenant's complaints, modulo 10 -> where its next due date falls:
# 2 in 10 overdue, 3 in 10 due this week, the rest later.
DUE_MIX = {0: "overdue", 5: "overdue", 1: "this_week", 4: "this_week", 8: "this_week"}
# The tenant's analysts own its cases in turn; every fifth case is left for someone to take.
OWNERS = {"acme": ("analyst", "analyst_b"), "northwind": ("analyst2",)}
UNASSIGNED_EVERY = 5


def received_for(*, policy, position: int, today: date) -> date:
    """The received date that puts the case's first due date (acknowledgement) where DUE_MIX says:
    overdue by a few days, due in 1-6 days, or due in two weeks or more."""
    wanted = DUE_MIX.get(position % 10, "later")
    low, high = {"overdue": (today - timedelta(days=9), today - timedelta(days=2)),
                 "this_week": (today + timedelta(days=1), today + timedelta(days=6)),
                 "later": (today + timedelta(days=10), today + timedelta(days=30))}[wanted]
    for back in range(0, 120):
        start = today - timedelta(days=back)
        due = min(compute_due_dates(policy, start).values())
        if low <= due <= high:
            return start
    return today


def demo_password() -> str:
    return os.environ.get("DEMO_PASSWORD") or DEFAULT_PASSWORD


def read_sample(path: Path = DEMO_DATA) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _clean(value: str | None) -> str:
    """The newer CFPB export writes the literal text "None" where the older one leaves a blank."""
    value = (value or "").strip()
    return "" if value == "None" else value


def case_fields_from_row(row: dict[str, str]) -> dict:
    """The case_create arguments for one complaint row."""
    complaint_id = _clean(row["Complaint ID"])
    issue = _clean(row["Issue"])
    company = _clean(row["Company"])
    title = f"{issue or _clean(row['Product'])} — {company}" if company else issue
    return {
        "title": title[:300],
        "received_at": date.fromisoformat(_clean(row["Date received"])[:10]),
        "narrative": row["Consumer complaint narrative"],
        "product": _clean(row["Product"])[:200],
        "sub_product": _clean(row["Sub-product"])[:200],
        "issue": issue[:300],
        "sub_issue": _clean(row["Sub-issue"])[:300],
        "company": company[:200],
        "consumer_state": _clean(row["State"])[:10],
        "tags": _clean(row["Tags"])[:200],
        "complainant_email": f"consumer-{complaint_id}@example.org",
        "source": SOURCE,
        "source_reference": complaint_id,
    }


class Command(DatabaseCommand):
    help = ("Create the demo tenants, users (password from DEMO_PASSWORD, default arbiter-demo) and cases "
            "from real CFPB complaints. Safe to run again: it creates only what is missing.")

    def handle(self, *args, **options):
        password = demo_password()
        tenants = {}
        for spec in TENANTS:
            tenant, created = Tenant.objects.get_or_create(slug=spec.slug, defaults={"name": spec.name})
            tenants[spec.slug] = tenant
            self._say(created, f"tenant {spec.slug} ({tenant.name})")

        users = {}
        for spec in USERS:
            users[spec.username] = self._ensure_user(spec, tenants[spec.tenant], password)

        rows = read_sample()
        per_tenant: dict[str, list[dict]] = {"acme": [], "northwind": []}
        for index, row in enumerate(rows):
            slug = "northwind" if index % SECOND_TENANT_EVERY == SECOND_TENANT_EVERY - 1 else "acme"
            per_tenant[slug].append(row)

        created_count = existing_count = 0
        for slug, analyst, supervisor in (("acme", "analyst", "supervisor"),
                                          ("northwind", "analyst2", "supervisor2")):
            stories = STORIES[slug]
            owners = OWNERS[slug]
            for position, row in enumerate(per_tenant[slug]):
                story = stories[position] if position < len(stories) else ()
                owner = None if position % UNASSIGNED_EVERY == UNASSIGNED_EVERY - 1 \
                    else users[owners[position % len(owners)]]
                case, created = self._ensure_case(tenant=tenants[slug], row=row, analyst=users[analyst],
                                                  supervisor=users[supervisor], story=story, owner=owner,
                                                  position=position)
                if created:
                    created_count += 1
                    extra = f" → {', '.join(story)}" if story else ""
                    self.stdout.write(f"  created case {case.reference} [{slug}] {case.status}{extra}: "
                                      f"{case.title[:70]}")
                else:
                    existing_count += 1
        self.stdout.write(self.style.SUCCESS(
            f"seed_demo: {created_count} cases created, {existing_count} already present "
            f"({len(rows)} complaints in the sample)."))

    def _say(self, created: bool, what: str) -> None:
        if created:
            self.stdout.write(f"  created {what}")

    def _ensure_user(self, spec: DemoUser, tenant, password: str):
        user, created = User.objects.get_or_create(
            username=spec.username,
            defaults={"tenant": tenant, "role": spec.role, "is_staff": spec.is_staff,
                      "is_superuser": spec.is_superuser, "email": f"{spec.username}@{tenant.slug}.example"})
        if created:
            user.set_password(password)
            user.save(update_fields=["password"])
            self._say(True, f"user {spec.username} ({spec.role}, {tenant.slug})")
        elif not user.check_password(password):
            # The printed logins must work: follow DEMO_PASSWORD when it changed. (Only when it
            # changed: re-hashing every run would log everyone out at each `make run`.)
            user.set_password(password)
            user.save(update_fields=["password"])
            self.stdout.write(f"  reset the password of {spec.username} to DEMO_PASSWORD")
        return user

    def _ensure_case(self, *, tenant, row, analyst, supervisor, story, owner, position: int):
        from django.utils import timezone

        fields = case_fields_from_row(row)
        existing = Case.objects.filter(tenant=tenant, source=SOURCE,
                                       source_reference=fields["source_reference"]).first()
        if existing is not None:
            return existing, False
        fields["received_at"] = received_for(policy=deadline_policy_current(tenant_id=tenant.pk),
                                             position=position, today=timezone.localdate())
        with transaction.atomic():
            case = case_create(actor=analyst, tenant=tenant, **fields)
            if owner is not None:
                case_take(actor=owner, case=case)
                case.refresh_from_db()
            for step in story:
                STEPS[step](case=case, analyst=analyst, supervisor=supervisor)
                case.refresh_from_db()
        return case, True


# --- the little stories that give the queue some variety ---------------------------------------
# Each step calls the services with the person who would do it in real life.

# Deciding/closing a case with no notice sent needs a confirmation with a reason.
DEMO_CONFIRMATION = "Demo data: the consumer was answered before the case was loaded into Arbiter."


def _transition(name: str, by: str = "analyst", reason: str = ""):
    def step(*, case, analyst, supervisor):
        actor = analyst if by == "analyst" else supervisor
        case_transition(actor=actor, case=case, transition=name, reason=reason,
                        confirm_reason=DEMO_CONFIRMATION if name in ("decide", "close") else "")

    return step


def _risk_high_approved(*, case, analyst, supervisor):
    proposal = proposal_create(
        actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
        rationale="The narrative alleges a monetary loss and repeated failed contact with the company.",
        evidence_refs=list(case.evidence.values_list("pk", flat=True)[:1]))
    proposal_approve(actor=supervisor, proposal=proposal, note="Agreed: the stated loss justifies high risk.")


def _risk_medium_pending(*, case, analyst, supervisor):
    proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "medium"},
                    rationale="Tagged complaint: policy asks for at least medium risk.",
                    evidence_refs=list(case.evidence.values_list("pk", flat=True)[:1]))


def _notice_text(case) -> tuple[str, str]:
    subject = f"Your complaint {case.reference}: we have received it"
    body = (f"Dear consumer,\n\nWe have received your complaint about {case.company or 'your provider'} "
            f"({case.product or 'consumer finance'}), registered as {case.reference}. An analyst is reviewing "
            f"it and we will write to you again within 60 days.\n\nConsumer Affairs\n")
    return subject, body


def _notice_draft(*, case, analyst, supervisor):
    subject, body = _notice_text(case)
    notice_draft(actor=analyst, case=case, subject=subject, body=body)


def _notice_pending(*, case, analyst, supervisor):
    subject, body = _notice_text(case)
    notice_submit(actor=analyst, notice=notice_draft(actor=analyst, case=case, subject=subject, body=body))


def _notice_approved(*, case, analyst, supervisor):
    subject, body = _notice_text(case)
    notice = notice_submit(actor=analyst, notice=notice_draft(actor=analyst, case=case, subject=subject,
                                                               body=body))
    notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash, note="Standard wording.")


STEPS = {
    "triage": _transition("triage"),
    "start_review": _transition("start_review"),
    "request_evidence": _transition("request_evidence"),
    "mark_ready": _transition("mark_ready"),
    "decide": _transition("decide", by="supervisor",
                          reason="Upheld: the company must correct the account and refund the disputed amount."),
    "close": _transition("close", by="supervisor"),
    "risk_high": _risk_high_approved,
    "risk_medium_proposed": _risk_medium_pending,
    "notice_draft": _notice_draft,
    "notice_pending_approval": _notice_pending,
    "notice_approved": _notice_approved,
}

# Position of the case among its tenant's complaints -> steps. Cases past the list stay new.
STORIES: dict[str, list[tuple[str, ...]]] = {
    "acme": [
        ("triage",),
        ("triage", "start_review"),
        ("triage", "start_review", "request_evidence"),
        ("triage", "start_review", "risk_medium_proposed"),
        ("triage", "start_review", "risk_high", "mark_ready"),
        ("triage", "start_review", "risk_high", "mark_ready", "decide"),
        ("triage", "start_review", "risk_high", "mark_ready", "decide", "close"),
        ("triage", "notice_pending_approval"),
        ("triage", "start_review", "notice_draft"),
        ("triage", "notice_approved"),
    ],
    "northwind": [
        ("triage",),
        ("triage", "start_review", "notice_pending_approval"),
    ],
}
