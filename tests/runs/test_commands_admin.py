"""Management commands and admin actions go through the same services."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from runs import services
from runs.executor import run_step
from runs.models import AgentRun, RunStatus
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import drive


def _runs():
    return sorted(AgentRun.objects.values_list("pk", "status", "version", "next_sequence", "error"))

pytestmark = pytest.mark.django_db


@pytest.fixture
def loop(analyst, tenant, test_graphs):
    return services.run_start(actor=analyst, tenant=tenant, graph="test_loop", input={"n": 3}, enqueue=False)


def test_run_cancel_command(loop, capsys):
    call_command("run_cancel", str(loop.pk), "--reason", "duplicate")
    loop.refresh_from_db()
    assert loop.status == RunStatus.CANCELLED and "duplicate" in loop.error
    assert f"Run R{loop.pk} cancelled." in capsys.readouterr().out
    assert AuditEvent.objects.get(action="runs.run.cancelled").actor_id == "system:cli"
    with assert_nothing_changed(extra={"runs": _runs}), pytest.raises(CommandError, match="already cancelled"):
        call_command("run_cancel", str(loop.pk))
    with assert_nothing_changed(extra={"runs": _runs}), pytest.raises(CommandError, match="No run 999"):
        call_command("run_cancel", "999")


def test_run_resume_command_inline_finishes_a_stalled_run(loop, capsys):
    run_step(run_id=loop.pk, worker_id="dead")
    AgentRun.objects.filter(pk=loop.pk).update(lease_owner="dead", lease_expires_at=timezone.now() - timedelta(seconds=1))
    call_command("run_resume", str(loop.pk), "--inline")
    loop.refresh_from_db()
    assert loop.status == RunStatus.COMPLETED and loop.steps.count() == 3
    assert "Resumed run" in capsys.readouterr().out


def test_run_resume_as_a_user_without_the_role_is_refused(loop, auditor):
    with assert_nothing_changed(extra={"runs": _runs}), pytest.raises(CommandError, match="cannot resume runs"):
        call_command("run_resume", str(loop.pk), "--user", auditor.username)


def test_reap_leases_command(loop, enqueued, capsys):
    call_command("reap_leases")
    assert enqueued == [(loop.pk, None, 0)]
    assert f"Re-enqueued 1 run(s): R{loop.pk}." in capsys.readouterr().out


@pytest.fixture
def staff_client(client, supervisor):
    supervisor.is_staff = True
    supervisor.save()
    client.force_login(supervisor)
    return client


def test_admin_lists_runs_and_cancels_through_the_service(staff_client, loop, outsider):
    other = services.run_start(actor=outsider, tenant=outsider.tenant, graph="test_loop", enqueue=False)
    page = staff_client.get(reverse("admin:runs_agentrun_changelist"))
    assert page.status_code == 200
    html = page.content.decode()
    assert reverse("admin:runs_agentrun_change", args=[loop.pk]) in html
    assert reverse("admin:runs_agentrun_change", args=[other.pk]) not in html  # another tenant's run
    response = staff_client.post(reverse("admin:runs_agentrun_changelist"),
                                 {"action": "cancel_runs", "_selected_action": [loop.pk], "reason": "ops"})
    assert response.status_code == 302
    loop.refresh_from_db()
    assert loop.status == RunStatus.CANCELLED
    assert AuditEvent.objects.get(action="runs.run.cancelled").actor_id.startswith("user:")


def test_admin_fork_needs_a_step_and_refusals_are_messages(staff_client, analyst, case, fake_provider):
    run = drive(services.run_start(actor=analyst, case=case, enqueue=False))
    url = reverse("admin:runs_agentrun_changelist")
    response = staff_client.post(url, {"action": "fork_runs", "_selected_action": [run.pk]}, follow=True)
    assert "Give the step to fork from" in response.content.decode() and AgentRun.objects.count() == 1
    response = staff_client.post(url, {"action": "resume_runs", "_selected_action": [run.pk]}, follow=True)
    assert "fork it from a checkpoint" in response.content.decode() and AgentRun.objects.count() == 1
    staff_client.post(url, {"action": "fork_runs", "_selected_action": [run.pk], "from_step": "2"})
    fork = AgentRun.objects.exclude(pk=run.pk).get()
    assert fork.parent_run == run and fork.forked_from_checkpoint.sequence == 2
