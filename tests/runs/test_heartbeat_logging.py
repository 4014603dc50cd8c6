"""The heartbeat thread's log when it cannot write: one line per miss for a database that is busy or
away (SQLite's single writer under `evaluate`, an outage), a traceback only for what nobody expects."""

import logging
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
