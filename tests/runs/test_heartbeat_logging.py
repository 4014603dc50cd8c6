"""The heartbeat thread's log when it cannot write: one line per miss for a database that is busy or
away (SQLite's single writer under `evaluate`, an outage), a traceback only for what nobody expects, and
one line for a lease lost, after which that step gets no more beats."""

import logging
import threading
import time

import pytest
from django.db import OperationalError

from runs import leases


def _wait_for(records, predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(predicate(record) for record in records):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def fast_heartbeats(settings):
    settings.ARBITER_RUN_HEARTBEAT_SECONDS = 0.2


def _heartbeat_log(monkeypatch, caplog, run_id: int, error: Exception) -> list:
    """The runs.leases records about `run_id` while its heartbeat's lease renewal raises `error`."""
    def failing(run_id, worker_id):
        raise error

    monkeypatch.setattr(leases, "lease_renew", failing)
    caplog.set_level(logging.WARNING, logger="runs.leases")
    with leases.heartbeat_scope(run_id, "w-test"):
        assert _wait_for(caplog.records, lambda r: str(run_id) in r.getMessage())
    return [r for r in caplog.records if str(run_id) in r.getMessage()]


def test_a_busy_database_is_one_line_without_traceback(fast_heartbeats, monkeypatch, caplog):
    mine = _heartbeat_log(monkeypatch, caplog, 424242, OperationalError("database is locked"))
    assert all(r.exc_info is None for r in mine)
    assert "database is locked" in mine[0].getMessage()
    assert "next try follows in 0.2 s" in mine[0].getMessage()


def test_an_unexpected_error_keeps_its_traceback(fast_heartbeats, monkeypatch, caplog):
    mine = _heartbeat_log(monkeypatch, caplog, 434343, RuntimeError("bug"))
    assert mine[0].exc_info is not None


def test_a_lost_lease_is_one_line_and_the_step_gets_no_more_beats(fast_heartbeats, monkeypatch, caplog):
    calls = []

    def lost(run_id, worker_id):
        calls.append(run_id)
        raise leases.LeaseLost(f"run {run_id}: lease lost")

    monkeypatch.setattr(leases, "lease_renew", lost)
    caplog.set_level(logging.WARNING, logger="runs.leases")
    with leases.heartbeat_scope(454545, "w-test"):
        assert _wait_for(caplog.records, lambda r: "454545" in r.getMessage())
        time.sleep(1.0)  # five heartbeat intervals
    mine = [r for r in caplog.records if "454545" in r.getMessage()]
    assert len(mine) == 1 and calls == [454545]
    assert "no more heartbeats for this step" in mine[0].getMessage()


def test_the_heartbeat_thread_reads_no_setting_while_no_step_needs_it(monkeypatch):
    """Django's settings are not safe to read while another thread overrides them (a test's override
    replaces the wrapped object; a read in between finds None): once a CI run's heartbeat thread,
    left waiting from an earlier test, died of it. The interval is read by the step that registers."""
    with leases.heartbeat_scope(1, "w-idle"):
        pass  # the thread is started, and nothing is registered any more
    thread = next(t for t in threading.enumerate() if t.name == "run-heartbeats")

    class Unreadable:
        def __getattr__(self, name):
            raise AssertionError(f"the heartbeat thread read settings.{name}")

    died = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    monkeypatch.setattr(leases, "settings", Unreadable())
    time.sleep(0.8)  # three idle waits
    assert thread.is_alive() and died == []
