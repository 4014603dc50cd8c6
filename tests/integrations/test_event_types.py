"""The whole event catalogue (integrations.catalogue): for every event type, performing the change
in the service that makes it writes exactly one event of that type, in the change's transaction,
with the keys of the documented example, delivered to an endpoint subscribed to that type."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.mail.backends.base import BaseEmailBackend
from django.db import transaction
from fpdf import FPDF

from accounts.models import Role
from cases import services
from cases.email_delivery import EmailDeliveryUnknown
from cases.extraction import evidence_extraction_run
from cases.models import DeadlineCrossing
from cases.services.deadlines import deadline_crossings_record
from integrations.catalogue import (
    BY_TYPE,
    CATALOGUE,
    event_type_for,
    example_event,
    is_subscribed,
    types_matching,
)
from integrations.events import event_representation
from integrations.models import EventType, IntegrationEvent, WebhookDelivery
from integrations.webhooks import webhook_endpoint_create
from runs import services as run_services
from runs.executor import run_step
from tests.factories import UserFactory, make_case

pytestmark = pytest.mark.django_db


class UnknownOutcomeBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise EmailDeliveryUnknown("no final reply after DATA")


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise ConnectionRefusedError("[Errno 111] Connection refused")


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)


@pytest.fixture
def ctx(tenant, analyst, supervisor, case, settings):
    return {"analyst": analyst, "supervisor": supervisor, "case": case, "settings": settings,
            "supervisor_b": UserFactory(username="supervisor-b", tenant=tenant, role=Role.SUPERVISOR)}


def _proposal(ctx, level="high"):
    return services.proposal_create(actor=ctx["analyst"], case=ctx["case"], kind="risk_level",
                                    payload={"risk_level": level}, rationale="The narrative says so.")


def _notice(ctx, *, submitted=False, approved=False):
    notice = services.notice_draft(actor=ctx["analyst"], case=ctx["case"], subject="Your complaint",
                                   body="We received your complaint and are reviewing it.")
    if submitted or approved:
        notice = services.notice_submit(actor=ctx["analyst"], notice=notice)
    if approved:
        notice = services.notice_approve(actor=ctx["supervisor"], notice=notice, content_hash=notice.content_hash,
                                         override_reason="flags seen")
    return notice


def _dispatch(ctx, notice, backend: str):
    ctx["settings"].EMAIL_BACKEND = backend
    return services.notice_dispatch(actor=ctx["analyst"], notice=notice)


def _pdf() -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Statement of account: the disputed charge appears twice.")
    return bytes(pdf.output())


def _failing_run(ctx):
    run = run_services.run_start(actor=ctx["analyst"], case=ctx["case"], budget={"max_steps": 1}, enqueue=False)

    def act():
        for _ in range(5):
            if run_step(run_id=run.pk, worker_id="w1", enqueue=False).action in ("failed", "finished"):
                return None
        raise AssertionError("the run did not fail on its step budget")
    return act


def _unknown_then_settle(ctx):
    notice = _dispatch(ctx, _notice(ctx, approved=True), f"{__name__}.UnknownOutcomeBackend")
    return lambda: services.notice_settle(actor=ctx["supervisor_b"], notice=notice, outcome="sent",
                                          reason="The mail log shows it left.", message_id="<found@example>")


def _deadline_crossed(ctx):
    case = ctx["case"]

    def act():
        deadline_crossings_record(today=case.close_due + timedelta(days=1))
        return DeadlineCrossing.objects.filter(case=case).count()  # one event per crossing recorded
    return act


# Each scenario does its setup and returns the act: the one change whose events are counted. The
# act returns how many events of the type it should write when that is not one.
SCENARIOS = {
    "case.created": lambda c: lambda: make_case(actor=c["analyst"], title="Another complaint"),
    "case.updated": lambda c: lambda: services.case_deadline_extend(
        actor=c["supervisor"], case=c["case"], deadline="close", until=c["case"].close_due + timedelta(days=10),
        reason="The consumer asked for more time."),
    "case.transitioned": lambda c: lambda: services.case_transition(actor=c["supervisor"], case=c["case"],
                                                                    transition="triage"),
    "case.assigned": lambda c: lambda: services.case_take(actor=c["analyst"], case=c["case"]),
    "evidence.added": lambda c: lambda: services.evidence_add(actor=c["analyst"], case=c["case"], title="Bill",
                                                              text="The bill shows 120 EUR."),
    "evidence.extracted": lambda c: (lambda evidence: lambda: evidence_extraction_run(evidence_id=evidence.pk))(
        services.evidence_add(actor=c["analyst"], case=c["case"], title="statement.pdf", upload=SimpleUploadedFile(
            "statement.pdf", _pdf(), content_type="application/pdf"))),
    "proposal.created": lambda c: lambda: _proposal(c),
    "proposal.approved": lambda c: (lambda p: lambda: services.proposal_approve(
        actor=c["supervisor"], proposal=p, note="Agreed."))(_proposal(c)),
    "proposal.rejected": lambda c: (lambda p: lambda: services.proposal_reject(
        actor=c["supervisor"], proposal=p, note="Not from this evidence."))(_proposal(c)),
    "proposal.staled": lambda c: (lambda first, _rival: lambda: services.proposal_approve(
        actor=c["supervisor"], proposal=first, note="Agreed."))(_proposal(c, "high"), _proposal(c, "low")),
    "proposal.withdrawn": lambda c: (lambda p: lambda: services.proposal_withdraw(actor=c["analyst"], proposal=p))(
        _proposal(c)),
    "notice.drafted": lambda c: lambda: _notice(c),
    "notice.submitted": lambda c: (lambda n: lambda: services.notice_submit(actor=c["analyst"], notice=n))(
        _notice(c)),
    "notice.approved": lambda c: (lambda n: lambda: services.notice_approve(
        actor=c["supervisor"], notice=n, content_hash=n.content_hash, override_reason="flags seen"))(
        _notice(c, submitted=True)),
    "notice.rejected": lambda c: (lambda n: lambda: services.notice_reject(
        actor=c["supervisor"], notice=n, note="Name the bill."))(_notice(c, submitted=True)),
    "notice.withdrawn": lambda c: (lambda n: lambda: services.notice_withdraw(actor=c["analyst"], notice=n))(
        _notice(c)),
    "notice.dispatched": lambda c: (lambda n: lambda: _dispatch(
        c, n, "django.core.mail.backends.locmem.EmailBackend"))(_notice(c, approved=True)),
    "notice.sent": lambda c: (lambda n: lambda: _dispatch(
        c, n, "django.core.mail.backends.locmem.EmailBackend"))(_notice(c, approved=True)),
    "notice.failed": lambda c: (lambda n: lambda: _dispatch(c, n, f"{__name__}.RefusingBackend"))(
        _notice(c, approved=True)),
    "notice.unknown": lambda c: (lambda n: lambda: _dispatch(c, n, f"{__name__}.UnknownOutcomeBackend"))(
        _notice(c, approved=True)),
    "notice.settled": _unknown_then_settle,
    "run.started": lambda c: lambda: run_services.run_start(actor=c["analyst"], case=c["case"], enqueue=False),
    "run.finished": lambda c: (lambda run: lambda: run_services.run_cancel(
        actor=c["analyst"], run=run, reason="Wrong case."))(
        run_services.run_start(actor=c["analyst"], case=c["case"], enqueue=False)),
    "run.failed": _failing_run,
    "deadline.crossed": _deadline_crossed,
}


def test_every_current_type_has_a_scenario():
    # ping is no change of anything: sent on request to one endpoint (tests/integrations/test_webhooks_management.py)
    assert set(SCENARIOS) == {spec.type for spec in CATALOGUE if not spec.deprecated and spec.type != "ping"}
    assert set(BY_TYPE) == set(EventType.values)


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
def test_the_change_writes_exactly_one_event_of_its_type_with_the_documented_shape(kind, ctx, receiver, kicked):
    endpoint, _ = webhook_endpoint_create(actor=ctx["supervisor"], url=receiver.url, event_types=[kind])
    act = SCENARIOS[kind](ctx)
    before = set(IntegrationEvent.objects.filter(type=kind).values_list("pk", flat=True))
    result = act()
    expected = result if isinstance(result, int) and not isinstance(result, bool) else 1
    new = list(IntegrationEvent.objects.filter(type=kind).exclude(pk__in=before).order_by("pk"))
    assert len(new) == expected >= 1
    spec, example = BY_TYPE[kind], example_event(BY_TYPE[kind])
    for event in new:
        body = event_representation(event, tenant_slug="acme")
        assert set(body) == set(example) and set(body["data"]) == set(example["data"])
        assert body["type"] == kind and body["data"]["action"] in spec.actions
        assert body["data"]["target_type"] == spec.target_type and body["data"]["case"]
        assert body["data"]["object_url"] and body["data"]["object_url"].startswith("/api/v1/")
    assert WebhookDelivery.objects.filter(endpoint=endpoint).count() == expected


def test_a_rolled_back_change_leaves_no_event_of_any_type(ctx):
    notice = _notice(ctx, submitted=True)
    before = IntegrationEvent.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        services.notice_approve(actor=ctx["supervisor"], notice=notice, content_hash=notice.content_hash,
                                override_reason="flags seen")
        raise RuntimeError("the change fails after its event")
    assert IntegrationEvent.objects.count() == before


def test_a_deadline_crossing_is_one_event_however_often_the_task_runs(ctx):
    case, today = ctx["case"], ctx["case"].close_due + timedelta(days=1)
    first = deadline_crossings_record(today=today)
    second = deadline_crossings_record(today=today)
    assert first >= 1 and second == 0
    events = IntegrationEvent.objects.filter(type="deadline.crossed", data__case=case.reference)
    assert events.count() == first == DeadlineCrossing.objects.filter(case=case).count()


def test_former_umbrella_types_still_receive_what_they_stood_for():
    assert is_subscribed("case.transitioned", ["case.changed"]) and is_subscribed("case.created", ["case.changed"])
    assert is_subscribed("proposal.approved", ["proposal.decided"])
    assert is_subscribed("run.failed", ["run.finished"])
    assert not is_subscribed("proposal.created", ["proposal.decided"])
    assert not is_subscribed("notice.sent", ["case.changed"])
    assert types_matching("proposal.decided") == ["proposal.decided", "proposal.approved", "proposal.rejected"]
    assert types_matching("notice.sent") == ["notice.sent"]


def test_the_feed_filter_by_a_former_type_returns_its_members(api, ctx, kicked):
    proposal = _proposal(ctx)
    services.proposal_approve(actor=ctx["supervisor"], proposal=proposal, note="Agreed.")
    items = api(ctx["supervisor"]).get("/api/v1/events/?type=proposal.decided").json()["results"]
    assert [item["type"] for item in items] == ["proposal.approved"]


@pytest.mark.parametrize("action, kind", [
    ("cases.case.created", "case.created"), ("cases.case.risk_changed", "case.updated"),
    ("cases.case.deadlines_changed", "case.updated"), ("cases.case.transitioned", "case.transitioned"),
    ("cases.case.assigned", "case.assigned"), ("cases.proposal.staled", "proposal.staled"),
    ("cases.notice.dispatch_started", "notice.dispatched"), ("cases.notice.dispatch_unknown", "notice.unknown"),
    ("cases.notice.settled", "notice.settled"), ("runs.run.failed", "run.failed"),
    ("runs.run.cancelled", "run.finished"), ("cases.deadline.overdue", "deadline.crossed"),
    ("cases.notice.dispatch_requested", None), ("runs.step.completed", None)])
def test_which_audit_actions_are_which_events(action, kind):
    assert event_type_for(action) == kind


def test_the_catalogue_is_served_with_an_example_per_type(api, supervisor):
    response = api(supervisor).get("/api/v1/event-types/")
    assert response.status_code == 200
    entries = {entry["type"]: entry for entry in response.json()["results"]}
    assert set(entries) == set(EventType.values)
    assert entries["notice.unknown"]["example"]["type"] == "notice.unknown"
    assert entries["run.failed"]["also_for_subscribers_of"] == ["run.finished"]
    assert entries["case.changed"]["deprecated"] is True
