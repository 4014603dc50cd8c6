"""Browser writes after a deadlock (web.retries): PostgreSQL aborts the action's transaction once
with a real deadlock_detected error raised inside it, after the service has written everything;
the page answers exactly as the same action does on a twin case without the fault, and the rows
written are those of the second attempt only (the same counts as the twin's). When the database
keeps refusing, the page says so with 503 and Retry-After and nothing changed."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.test import Client
from django.urls import URLPattern, get_resolver, reverse

import cases.services
import runs.services
from cases.models import Evidence, NoticeStatus, ProposalStatus
from runs.models import AgentRun
from tests.factories import make_case
from tests.helpers import CountDelta, assert_nothing_changed
from web import urls as web_urls
from web.retries import write_retried_on_deadlock

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "case-body"}
RAISE_DEADLOCK = ("DO $$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = 'deadlock_detected'; "
                  "END $$")

def reject_deadlocking_once_on(monkeypatch, proposal_pk: int) -> list[int]:
    """Replace cases.services.proposal_reject with the real one that, the first time it rejects
    `proposal_pk`, is aborted by PostgreSQL as a deadlock after its writes. Returns the list of
    proposal ids it was called with, in order."""
    real = cases.services.proposal_reject
    calls: list[int] = []

    def deadlocks_once(**kwargs):
        calls.append(kwargs["proposal"].pk)
        with transaction.atomic():
            result = real(**kwargs)
            if kwargs["proposal"].pk == proposal_pk and calls.count(proposal_pk) == 1:
                with connection.cursor() as cursor:
                    cursor.execute(RAISE_DEADLOCK)
        return result

    monkeypatch.setattr(cases.services, "proposal_reject", deadlocks_once)
    return calls



def fail_first(monkeypatch, module, name: str, *, times: int = 1) -> list[int]:
    """Replace module.name by the real service followed, on its first `times` calls, by a deadlock
    PostgreSQL raises inside the same transaction (so everything the service wrote is rolled back)."""
    real = getattr(module, name)
    calls: list[int] = []

    def flaky(**kwargs):
        calls.append(1)
        with transaction.atomic():
            result = real(**kwargs)
            if len(calls) <= times:
                with connection.cursor() as cursor:
                    cursor.execute(RAISE_DEADLOCK)
        return result

    monkeypatch.setattr(module, name, flaky)
    return calls


@pytest.fixture
def enqueued(monkeypatch):
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


def _pending_notice(analyst, case):
    notice = cases.services.notice_draft(actor=analyst, case=case, subject="Your complaint",
                                         body="We are looking into it.")
    cases.services.notice_submit(actor=analyst, notice=notice)
    notice.refresh_from_db()
    return notice


def _proposal(agent, case):
    return cases.services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                          rationale="Large loss.")


# Each action: (service module, service name, who posts, how to set up a case → (url name, args, data)).
ACTIONS = {
    "case transition": (cases.services, "case_transition", "analyst",
                        lambda p, c: ("case_transition", [], {"transition": "triage", "expected_version": c.version})),
    "evidence text": (cases.services, "evidence_add", "analyst",
                      lambda p, c: ("evidence_add_text", [], {"title": "Call note", "text": "They called."})),
    "evidence upload": (cases.services, "evidence_add", "analyst",
                        lambda p, c: ("evidence_upload", [], {"title": "Letter", "file": SimpleUploadedFile(
                            "letter.txt", b"Dear bank, " * 50, content_type="text/plain")})),
    "notice draft": (cases.services, "notice_draft", "analyst",
                     lambda p, c: ("notice_draft", [], {"recipient": "c@example.org", "subject": "Hello",
                                                        "body": "We are on it."})),
    "notice approve": (cases.services, "notice_approve", "supervisor",
                       lambda p, c: (lambda n: ("notice_approve", [n.pk], {"content_hash": n.content_hash}))(
                           _pending_notice(p["analyst"], c))),
    "proposal approve": (cases.services, "proposal_approve", "supervisor",
                         lambda p, c: ("proposal_approve", [_proposal(p["agent"], c).pk],
                                       {"note": "Agreed.", "expected_version": c.version, "evidence_seen": ""})),
    "proposal reject": (cases.services, "proposal_reject", "supervisor",
                        lambda p, c: ("proposal_reject", [_proposal(p["agent"], c).pk], {"note": "Not convinced."})),
    "run start": (runs.services, "run_start", "analyst", lambda p, c: ("case_analyse", [], {})),
}


def _post(people, who, case, setup):
    name, args, data = setup(people, case)
    client = Client()
    client.force_login(people[who])
    with CountDelta() as delta:
        response = client.post(reverse(f"web:{name}", args=[case.reference, *args]), data, **HTMX)
    return response, delta


def _delta(delta: CountDelta) -> dict:
    return {name: getattr(delta, name) for name in ("audit_events", "case_events", "proposals", "approvals",
                                                     "notices", "dispatches", "evidence", "outbox")}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("action", list(ACTIONS))
def test_a_page_action_aborted_by_a_deadlock_answers_as_if_nothing_happened(action, monkeypatch, analyst,
                                                                            supervisor, agent, enqueued):
    module, service, who, setup = ACTIONS[action]
    people = {"analyst": analyst, "supervisor": supervisor, "agent": agent}
    twin, case = make_case(actor=analyst, title="Twin"), make_case(actor=analyst, title="Deadlocked")
    expected, expected_delta = _post(people, who, twin, setup)  # the same action, no fault

    calls = fail_first(monkeypatch, module, service)
    response, delta = _post(people, who, case, setup)

    assert len(calls) == 2  # aborted once, run again once
    assert response.status_code == expected.status_code == 200
    # No refusal pinned to the form (the page body is answered with HX-Reswap only for one).
    assert "HX-Reswap" not in response and "HX-Reswap" not in expected
    assert _delta(delta) == _delta(expected_delta) and delta.audit_events >= 1  # the second attempt's rows only
    if action == "evidence upload":  # the file was read again from its start
        retried, plain = (Evidence.objects.get(case=c, kind="file") for c in (case, twin))
        assert (retried.size, retried.sha256) == (plain.size, plain.sha256) and retried.size == 550
    if action == "run start":
        assert AgentRun.objects.filter(case=case).count() == 1 and len(enqueued) == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_group_decision_retries_only_the_item_that_met_the_deadlock(monkeypatch, agent, supervisor):
    first, second = make_case(actor=supervisor, title="First"), make_case(actor=supervisor, title="Second")
    proposals = [_proposal(agent, first), _proposal(agent, second)]
    calls = reject_deadlocking_once_on(monkeypatch, proposals[1].pk)
    client = Client()
    client.force_login(supervisor)
    with CountDelta() as delta:
        response = client.post(reverse("web:review_decide"),
                               {"action": "reject", "note": "Not convinced.", "query": "section=decide",
                                "item": [f"p:{p.pk}:{p.case.version}" for p in proposals]}, **HTMX)
    assert response.status_code == 200
    assert calls == [proposals[0].pk, proposals[1].pk, proposals[1].pk]  # the first item decided once
    for proposal in proposals:
        proposal.refresh_from_db()
        assert proposal.status == ProposalStatus.REJECTED
    assert delta.audit_events >= 2 and "Not rejected" not in response.content.decode()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_deadlock_every_time_is_a_503_page_with_retry_after_and_nothing_changed(monkeypatch, analyst, supervisor,
                                                                                   case):
    notice = _pending_notice(analyst, case)
    calls = fail_first(monkeypatch, cases.services, "notice_approve", times=99)
    client = Client()
    client.force_login(supervisor)
    with assert_nothing_changed(case):
        response = client.post(reverse("web:notice_approve", args=[case.reference, notice.pk]),
                               {"content_hash": notice.content_hash})
    assert len(calls) == 3  # bounded
    assert response.status_code == 503 and response["Retry-After"] == "1"
    page = response.content.decode()
    assert "Arbiter is busy" in page and "nothing was changed" in page and "Traceback" not in page
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.PENDING_APPROVAL


def test_every_browser_route_retries_its_writes():
    patterns = [p for p in get_resolver(web_urls).url_patterns if isinstance(p, URLPattern)]
    assert len(patterns) > 40
    unwrapped = [p.name for p in patterns
                 if not (getattr(p.callback, "retried_on_deadlock", False)
                         or getattr(p.callback, "retries_each_change", False))]
    assert unwrapped == []
    assert [p.name for p in patterns if getattr(p.callback, "retries_each_change", False)] == ["review_decide"]


def test_a_safe_request_is_never_retried(rf):
    calls = []

    def view(request):
        calls.append(request.method)
        raise ValueError("not a lock conflict")

    wrapped = write_retried_on_deadlock(view)
    for request in (rf.get("/"), rf.post("/")):
        with pytest.raises(ValueError):
            wrapped(request)
    assert calls == ["GET", "POST"]
