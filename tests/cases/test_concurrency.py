"""Real threads against one case on PostgreSQL: the loser of a race gets a domain error and
nothing is half-written; a notice is sent exactly once. Every request may run beside a copy of itself.

Each thread has its own database connection (Django opens one per thread) and closes it at the
end. The rows they work on are committed first, hence transaction=True."""

import threading
from collections import Counter

import pytest
from django.core import mail
from django.db import connection

from audit.models import AuditEvent
from cases import services
from cases.models import Case, CaseEvent, Notice, NoticeDispatch, Proposal
from core.errors import Conflict, NotAllowed, Stale
from tests.helpers import bring_case_to

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def race(count: int, work) -> list:
    """Run work(i) in `count` threads released together; return each result or exception."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def worker(index):
        try:
            barrier.wait(timeout=30)
            results[index] = work(index)
        except Exception as exc:  # the test inspects what each thread got
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung (deadlock?)"
    return results


def outcome_kinds(results) -> Counter:
    return Counter("ok" if not isinstance(r, Exception) else type(r).__name__ for r in results)


def counts(case):
    return (CaseEvent.objects.filter(case=case).count(),
            AuditEvent.objects.filter(stream=f"case:{case.pk}").count())


@pytest.mark.parametrize("threads", [2, 6])
def test_same_transition_with_the_same_expected_version(threads, case, analyst, analyst_b):
    version = case.version
    events, audits = counts(case)
    people = [analyst, analyst_b]

    def work(i):
        return services.case_transition(actor=people[i % 2], case=Case.objects.get(pk=case.pk),
                                        transition="triage", expected_version=version)

    results = race(threads, work)
    kinds = outcome_kinds(results)
    assert kinds["ok"] == 1, results
    assert set(kinds) <= {"ok", "Conflict", "NotAllowed"}, results
    losers = [r for r in results if isinstance(r, Exception)]
    assert all(isinstance(r, Conflict | NotAllowed) for r in losers)
    case.refresh_from_db()
    assert (case.status, case.version) == ("triaged", version + 1)
    assert counts(case) == (events + 1, audits + 1)
    assert CaseEvent.objects.filter(case=case, event_type="case.transitioned").count() == 1


def test_same_transition_without_expected_version_loser_is_not_allowed(case, analyst, analyst_b):
    version = case.version
    people = [analyst, analyst_b]
    results = race(2, lambda i: services.case_transition(actor=people[i], case=Case.objects.get(pk=case.pk),
                                                         transition="triage"))
    assert outcome_kinds(results) == Counter({"ok": 1, "NotAllowed": 1}), results
    loser = next(r for r in results if isinstance(r, Exception))
    assert "Possible now: start_review" in loser.message
    case.refresh_from_db()
    assert case.version == version + 1


def test_rival_transitions_from_the_same_status(case, analyst, analyst_b, supervisor):
    """request_evidence and mark_ready both leave under_review: only one may win."""
    from tests.helpers import assess_risk

    assess_risk(case, level="low", proposer=analyst, approver=supervisor)
    bring_case_to(case, "under_review", supervisor=supervisor)
    version = case.version
    events, audits = counts(case)
    plan = [(analyst, "request_evidence"), (analyst_b, "mark_ready")]

    results = race(2, lambda i: services.case_transition(actor=plan[i][0], case=Case.objects.get(pk=case.pk),
                                                         transition=plan[i][1], expected_version=version))
    kinds = outcome_kinds(results)
    assert kinds["ok"] == 1 and sum(kinds.values()) == 2, results
    case.refresh_from_db()
    assert case.status in {"waiting_for_evidence", "ready_for_decision"}
    assert case.version == version + 1
    assert counts(case) == (events + 1, audits + 1)


def test_two_supervisors_approving_rival_proposals(case, agent, supervisor, supervisor_b):
    high = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                    rationale="Loss above $1,000.")
    low = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "low"},
                                   rationale="Small loss.")
    version = case.version
    plan = [(supervisor, high), (supervisor_b, low)]
    results = race(2, lambda i: services.proposal_approve(actor=plan[i][0],
                                                          proposal=Proposal.objects.get(pk=plan[i][1].pk)))
    assert outcome_kinds(results) == Counter({"ok": 1, "Stale": 1}), results
    winner = next(r for r in results if not isinstance(r, Exception))
    case.refresh_from_db()
    assert case.risk_level == winner.payload["risk_level"]
    assert case.version == version + 1
    statuses = sorted(Proposal.objects.filter(case=case).values_list("status", flat=True))
    assert statuses == ["applied", "stale"]
    assert CaseEvent.objects.filter(case=case, event_type="case.risk_changed").count() == 1


def test_same_idempotency_key_from_parallel_retries_makes_one_proposal(case, agent):
    results = race(5, lambda i: services.proposal_create(
        actor=agent, case=Case.objects.get(pk=case.pk), kind="risk_level", payload={"risk_level": "high"},
        rationale="Loss.", idempotency_key="run-7:step-3:propose"))
    assert outcome_kinds(results) == Counter({"ok": 5}), results
    assert len({p.pk for p in results}) == 1
    assert Proposal.objects.filter(case=case).count() == 1
    assert CaseEvent.objects.filter(case=case, event_type="proposal.created").count() == 1


def test_exactly_once_dispatch_under_twenty_concurrent_calls(case, analyst, analyst_b, supervisor):
    notice = services.notice_draft(actor=analyst, case=case, subject="Your complaint",
                                   body="We have received your complaint.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    mail.outbox.clear()
    people = [analyst, analyst_b, supervisor]

    results = race(20, lambda i: services.notice_dispatch(actor=people[i % 3],
                                                          notice=Notice.objects.get(pk=notice.pk)))

    kinds = outcome_kinds(results)
    assert kinds == Counter({"ok": 1, "Conflict": 19}), results
    assert len(mail.outbox) == 1
    assert NoticeDispatch.objects.filter(notice=notice).count() == 1
    dispatch = NoticeDispatch.objects.get(notice=notice)
    assert (dispatch.status, dispatch.attempts) == ("sent", 1)
    assert AuditEvent.objects.filter(action="cases.notice.sent", target_id=str(notice.pk)).count() == 1
    assert AuditEvent.objects.filter(action="cases.notice.dispatch_started", target_id=str(notice.pk)).count() == 1
    notice.refresh_from_db()
    assert notice.status == "sent"
    assert mail.outbox[0].message()["Message-ID"] == notice.external_message_id == dispatch.message_id
    assert all("sent only once" in r.message for r in results if isinstance(r, Conflict))


def test_concurrent_work_on_two_cases_keeps_both_chains_intact(analyst, analyst_b):
    """Different cases are different audit streams: parallel writers neither block on nor break
    each other's chain."""
    from django.core.management import call_command

    from tests.factories import make_case

    cases = [make_case(actor=analyst, title="A"), make_case(actor=analyst, title="B")]
    people = [analyst, analyst_b]

    def work(i):
        case = Case.objects.get(pk=cases[i % 2].pk)
        for transition in ("triage", "start_review", "request_evidence", "receive_evidence"):
            services.case_transition(actor=people[i % 2], case=case, transition=transition)
        return case.pk

    results = race(2, work)
    assert outcome_kinds(results) == Counter({"ok": 2}), results
    call_command("audit_verify")
    call_command("case_replay", "--all")


def test_stale_is_raised_not_swallowed_for_a_late_approver(case, agent, analyst, supervisor, supervisor_b):
    # Staleness by precondition (ADR 0006): the race is with a change to the field the proposal
    # depends on (its risk level), not with any change of the case.
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Loss.")
    rival = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                     rationale="Small loss.")
    plan = [lambda: services.proposal_approve(actor=supervisor_b, proposal=Proposal.objects.get(pk=rival.pk)),
            lambda: services.proposal_approve(actor=supervisor, proposal=Proposal.objects.get(pk=proposal.pk))]
    results = race(2, lambda i: plan[i]())
    # Whichever commits first wins; the other is refused cleanly, never half-applied.
    case.refresh_from_db()
    proposal.refresh_from_db()
    rival.refresh_from_db()
    assert sum(isinstance(r, Exception) for r in results) == 1, results
    if isinstance(results[1], Exception):
        assert isinstance(results[1], Stale)
        assert (proposal.status, rival.status, case.risk_level) == ("stale", "applied", "low")
    else:
        assert isinstance(results[0], Stale)
        assert (proposal.status, rival.status, case.risk_level) == ("applied", "stale", "high")
    assert case.status == "new"


# --- sibling proposals and deadline scans at the same time -------------------------------------

def test_sibling_proposals_approved_at_the_same_time_both_apply(case, agent, supervisor, supervisor_b):
    """Staleness by precondition: two approvers of siblings touching different fields both win."""
    bring_case_to(case, "triaged", supervisor=supervisor)
    risk = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                    rationale="Loss.")
    review = services.proposal_create(actor=agent, case=case, kind="status_transition",
                                      payload={"transition": "start_review"}, rationale="Next.")
    plan = [(supervisor, risk), (supervisor_b, review)]
    results = race(2, lambda i: services.proposal_approve(actor=plan[i][0],
                                                          proposal=Proposal.objects.get(pk=plan[i][1].pk)))
    assert outcome_kinds(results) == Counter({"ok": 2}), results
    case.refresh_from_db()
    assert (case.risk_level, case.status) == ("high", "under_review")


def test_two_deadline_scans_at_once_record_each_crossing_once(analyst):
    from datetime import date

    from cases.models import DeadlineCrossing
    from cases.services.deadlines import deadline_crossings_record
    from tests.factories import make_case

    case = make_case(actor=analyst, received_at=date(2026, 3, 2))
    results = race(4, lambda i: deadline_crossings_record(today=date(2026, 4, 1)))
    assert sorted(results) == [0, 0, 0, 2], results
    assert DeadlineCrossing.objects.filter(case=case).count() == 2
    assert CaseEvent.objects.filter(case=case, event_type="deadline.overdue").count() == 2
