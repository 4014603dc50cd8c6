"""Fork: a new run from any checkpoint reproduces steps 1..N and diverges after; both stay
inspectable."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from audit.models import AuditEvent
from cases import services as case_services
from cases.models import Proposal
from core.errors import NotAllowed
from runs import services
from runs.models import AgentRun, Artifact, Checkpoint, Finding, ModelCall, RunStatus, Step
from runs.state_load import state_at
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def _runs():
    return {"runs": AgentRun.objects.count(), "steps": Step.objects.count(), "checkpoints": Checkpoint.objects.count()}


def test_fork_from_step_n_reproduces_1_to_n_and_diverges_after(analyst, case, fake_provider):
    parent = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    assert parent.status == RunStatus.COMPLETED
    parent_steps = list(parent.steps.order_by("sequence"))
    new_evidence = case_services.evidence_add(actor=analyst, case=case, title="Bank statement",
                                              text="Statement shows the $1,200 charge twice on 2019-02-01.")

    fork = services.run_fork(actor=analyst, run=parent, from_sequence=2, enqueue=False)
    assert (fork.parent_run, fork.forked_from_checkpoint.sequence) == (parent, 2)
    assert (fork.status, fork.next_sequence, fork.current_node) == (RunStatus.QUEUED, 3, "risk_assessor")
    copied = list(fork.steps.order_by("sequence"))
    assert [(s.sequence, s.node, s.copied_from_id) for s in copied] == [
        (s.sequence, s.node, s.pk) for s in parent_steps[:2]]
    for sequence in (0, 1, 2):
        assert state_at(fork, sequence)[0].hash() == state_at(parent, sequence)[0].hash()
    assert Finding.objects.filter(run=fork).count() == Finding.objects.filter(run=parent, step__sequence__lte=2).count()
    assert all(f.copied_from_id for f in Finding.objects.filter(run=fork))
    assert AuditEvent.objects.filter(run_id=str(fork.pk), action="runs.run.forked").get().payload["parent_run"] == \
        parent.pk

    fork = drive(fork)
    assert fork.status == RunStatus.COMPLETED
    assert [s.node for s in fork.steps.order_by("sequence")] == [s.node for s in parent_steps]
    assert not fork.steps.filter(sequence__gt=2, copied_from__isnull=False).exists()
    # Diverged: the fork's risk assessor saw the new evidence; the parent's did not.
    parent_seen = ModelCall.objects.get(run=parent, sequence=3).source_refs["evidence"]
    fork_seen = ModelCall.objects.get(run=fork, sequence=3).source_refs["evidence"]
    assert new_evidence.pk in {e["id"] for e in fork_seen} and new_evidence.pk not in {e["id"] for e in parent_seen}
    assert not ModelCall.objects.filter(run=fork, sequence__lte=2).exists()  # steps 1..2 were not re-executed
    # Both stay inspectable, and the parent is untouched.
    parent.refresh_from_db()
    assert parent.status == RunStatus.COMPLETED and parent.steps.count() == len(parent_steps)
    assert Artifact.objects.filter(run=parent).count() == Artifact.objects.filter(run=fork).count()


def test_a_fork_does_not_duplicate_pending_proposals(analyst, case, fake_provider):
    parent = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    proposals = Proposal.objects.count()
    assert proposals >= 1
    fork = drive(services.run_fork(actor=analyst, run=parent, from_sequence=5, enqueue=False))
    assert fork.status == RunStatus.COMPLETED
    assert Proposal.objects.count() == proposals
    assert "already proposed" in str(Artifact.objects.get(run=fork, kind="proposals").content["skipped"])


def test_fork_from_the_start(analyst, case, fake_provider):
    parent = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    fork = services.run_fork(actor=analyst, run=parent, from_sequence=0, enqueue=False)
    assert fork.current_node == "triage" and fork.next_sequence == 1 and not fork.steps.exists()
    assert drive(fork).status == RunStatus.COMPLETED


def test_fork_refusals_change_nothing(analyst, case, fake_provider):
    parent = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    last = parent.steps.count()
    for sequence, message in ((last, "ended at step"), (99, "no checkpoint after step 99")):
        with assert_nothing_changed(case, extra={"runs": _runs}), pytest.raises(NotAllowed, match=message):
            services.run_fork(actor=analyst, run=parent, from_sequence=sequence)


def test_run_fork_command(analyst, case, fake_provider, capsys):
    parent = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    call_command("run_fork", str(parent.pk), "--from-step", "3", "--inline")
    out = capsys.readouterr().out
    fork = AgentRun.objects.exclude(pk=parent.pk).get()
    assert f"Forked R{parent.pk} after step 3 into R{fork.pk}." in out
    assert "(copied from parent)" in out and fork.status == RunStatus.COMPLETED
