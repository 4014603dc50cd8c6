"""drive_inline gives the lease back when it stops while holding it (a timeout, an error)."""

import time

import pytest

from runs import executor, services
from runs.executor import drive_inline
from runs.models import AgentRun, RunStatus


class Releases:
    def __init__(self, monkeypatch):
        self.calls: list[tuple[int, str]] = []
        original = executor.lease_release

        def release(run_id, worker_id):
            self.calls.append((run_id, worker_id))
            return original(run_id, worker_id)

        monkeypatch.setattr(executor, "lease_release", release)


def _start(analyst, tenant, graph: str, n: int = 3) -> AgentRun:
    return services.run_start(actor=analyst, tenant=tenant, graph=graph, input={"n": n},
                              budget={"max_steps": n + 5}, enqueue=False)


@pytest.mark.django_db(transaction=True)
def test_a_drive_stopped_by_an_error_while_holding_the_lease_releases_it(analyst, tenant, test_graphs, monkeypatch):
    releases = Releases(monkeypatch)
    run = _start(analyst, tenant, "test_loop", n=5)

    def stop(outcome):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        drive_inline(run_id=run.pk, worker_id="w1", timeout_seconds=60, on_step=stop)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.next_sequence == 2
    assert releases.calls == [(run.pk, "w1")]
    assert run.lease_owner is None


@pytest.mark.django_db(transaction=True)
def test_a_drive_that_times_out_holding_the_lease_releases_it(analyst, tenant, test_graphs, monkeypatch):
    releases = Releases(monkeypatch)
    run = _start(analyst, tenant, "test_loop", n=50)
    original = executor.run_step

    def slow_step(**kwargs):
        outcome = original(**kwargs)
        time.sleep(0.3)
        return outcome

    monkeypatch.setattr(executor, "run_step", slow_step)
    done = drive_inline(run_id=run.pk, worker_id="w1", timeout_seconds=0.5)
    assert done.status == RunStatus.RUNNING and 1 < done.next_sequence < 50
    assert releases.calls == [(run.pk, "w1")]
    assert done.lease_owner is None
