"""manage.py seed_demo: the demo tenants, people and cases, made through the services, and
idempotent."""

import csv
import io
from collections import Counter

import pytest
from django.core.management import call_command

from accounts.models import Role, Tenant, User
from audit.models import AuditEvent
from audit.verify import verify_all
from cases.management.commands.seed_demo import DEMO_DATA, case_fields_from_row
from cases.models import Approval, Case, CaseEvent, Evidence, Notice, Proposal

pytestmark = pytest.mark.django_db


def _seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def _counts() -> dict:
    return {model.__name__: model.objects.count()
            for model in (Tenant, User, Case, Evidence, CaseEvent, Proposal, Notice, Approval, AuditEvent)}


def test_seed_creates_tenants_people_and_cases_through_the_services(monkeypatch):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)

    output = _seed()

    assert set(Tenant.objects.values_list("slug", "name")) == {
        ("acme", "Acme Consumer Affairs"), ("northwind", "Northwind Regulator")}
    people = {u.username: (u.tenant.slug, u.role, u.is_staff, u.is_superuser)
              for u in User.objects.select_related("tenant")}
    assert people == {
        "analyst": ("acme", Role.ANALYST, False, False),
        "analyst_b": ("acme", Role.ANALYST, False, False),
        "supervisor": ("acme", Role.SUPERVISOR, True, False),
        "auditor": ("acme", Role.AUDITOR, False, False),
        "admin": ("acme", Role.ADMIN, True, True),
        "analyst2": ("northwind", Role.ANALYST, False, False),
        "supervisor2": ("northwind", Role.SUPERVISOR, False, False),
    }
    assert all(user.check_password("arbiter-demo") for user in User.objects.all())

    with DEMO_DATA.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert Case.objects.count() == len(rows) == 42
    assert Counter(Case.objects.values_list("tenant__slug", flat=True)) == {"acme": 34, "northwind": 8}
    assert "seed_demo: 42 cases created, 0 already present" in output

    for case in Case.objects.all():
        # Opened by the tenant's analyst through case_create: created event, narrative evidence,
        # both audited on the case's stream.
        first = case.events.order_by("sequence").first()
        analyst = "analyst" if case.tenant.slug == "acme" else "analyst2"
        assert (first.event_type, first.actor_id) == (
            "case.created", f"user:{User.objects.get(username=analyst).pk}")
        assert case.evidence.filter(title="Complaint narrative").count() == 1
        assert AuditEvent.objects.filter(stream=f"case:{case.pk}", action="cases.case.created").count() == 1
        assert (case.source, case.complainant_email) == ("CFPB", f"consumer-{case.source_reference}@example.org")
        assert "None" not in (case.tags, case.consumer_state)

    checked, breaks = verify_all()
    assert breaks == [] and checked >= 42
    call_command("case_replay", "--all", stdout=io.StringIO())  # raises on any drift

    # The queue shows variety: some cases moved along, proposals and notices waiting for a person.
    statuses = Counter(Case.objects.filter(tenant__slug="acme").values_list("status", flat=True))
    assert set(statuses) == {"new", "triaged", "under_review", "waiting_for_evidence", "ready_for_decision",
                             "decided", "closed"}
    assert Counter(Notice.objects.values_list("status", flat=True)) == {
        "pending_approval": 2, "draft": 1, "approved": 1}
    assert Proposal.objects.filter(status="pending").count() == 1
    assert Case.objects.filter(risk_level="high").count() == 3
    tags = set(Case.objects.values_list("tags", flat=True))
    assert {"Older American", "Servicemember"} <= tags


def test_a_second_run_creates_nothing(monkeypatch):
    _seed()
    before = _counts()

    output = _seed()

    assert _counts() == before
    assert "seed_demo: 0 cases created, 42 already present" in output
    assert "created" not in output.replace("0 cases created", "")


def test_demo_password_comes_from_the_environment_and_follows_it(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "first-secret-pass")
    _seed()
    assert User.objects.get(username="analyst").check_password("first-secret-pass")

    monkeypatch.setenv("DEMO_PASSWORD", "second-secret-pass")
    output = _seed()

    assert User.objects.get(username="supervisor2").check_password("second-secret-pass")
    assert "reset the password of analyst to DEMO_PASSWORD" in output
    assert Case.objects.count() == 42


def test_rows_of_both_export_vintages_are_read():
    old = {"Complaint ID": "3158580", "Date received": "2019-02-21", "Product": "Mortgage", "Sub-product": "",
           "Issue": "Trouble during payment process", "Sub-issue": "", "Company": "Example Servicing",
           "State": "MI", "Tags": "", "Consumer complaint narrative": "text"}
    new = old | {"Complaint ID": "21457306", "Date received": "2026-04-21T20:30:08.000Z", "Tags": "None",
                 "State": "None", "Company": ""}

    old_fields, new_fields = case_fields_from_row(old), case_fields_from_row(new)

    assert (str(old_fields["received_at"]), old_fields["consumer_state"], old_fields["tags"]) == ("2019-02-21", "MI", "")
    assert (str(new_fields["received_at"]), new_fields["consumer_state"], new_fields["tags"]) == ("2026-04-21", "", "")
    assert old_fields["title"] == "Trouble during payment process — Example Servicing"
    assert new_fields["title"] == "Trouble during payment process"


def test_the_demo_looks_like_a_working_day():
    """Due dates in a realistic mix (about 20% overdue, 30% due this week, the rest later or done),
    and every analyst owns cases, some left for someone to take."""
    from datetime import timedelta

    from django.utils import timezone

    _seed()
    today = timezone.localdate()
    for slug in ("acme", "northwind"):
        cases = list(Case.objects.filter(tenant__slug=slug))
        done = [c for c in cases if c.status in ("decided", "closed")]
        open_cases = [c for c in cases if c not in done]
        overdue = [c for c in open_cases if c.next_due and c.next_due < today]
        this_week = [c for c in open_cases if c.next_due and today <= c.next_due <= today + timedelta(days=7)]
        share = len(overdue) / len(cases), len(this_week) / len(cases)
        assert 0.1 <= share[0] <= 0.3, (slug, share)
        assert 0.2 <= share[1] <= 0.4, (slug, share)
        assert len(overdue) + len(this_week) < len(cases)  # the rest is later, or done
    assert Case.objects.filter(status__in=("decided", "closed")).exists()
    owned = Counter(Case.objects.exclude(assignee=None).values_list("assignee__username", flat=True))
    assert owned["analyst"] >= 5 and owned["analyst_b"] >= 5 and owned["analyst2"] >= 3, owned
    assert Case.objects.filter(assignee=None, status="new").exists()  # some left to take
