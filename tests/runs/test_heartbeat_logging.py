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


def test_a_busy_database_is_one_line_without_traceback(fast_heartbeats, monkeypatch, caplog):
    def locked(run_id, worker_id):
        raise OperationalError("database is locked")

    monkeypatch.setattr(leases, "lease_renew", locked)
    caplog.set_level(logging.WARNING, logger="runs.leases")
    with leases.heartbeat_scope(424242, "w-test"):
        assert _wait_for(caplog.records, lambda r: "424242" in r.getMessage())
    mine = [r for r in caplog.records if "424242" in r.getMessage()]
    assert all(r.exc_info is None for r in mine)
    assert "database is locked" in mine[0].getMessage()
    assert "next try follows in 0.2 s" in mine[0].getMessage()


def test_an_unexpected_error_keeps_its_traceback(fast_heartbeats, monkeypatch, caplog):
    def broken(run_id, worker_id):
        raise RuntimeError("bug")

    monkeypatch.setattr(leases, "lease_renew", broken)
    caplog.set_level(logging.WARNING, logger="runs.leases")
    with leases.heartbeat_scope(434343, "w-test"):
        assert _wait_for(caplog.records, lambda r: "434343" in r.getMessage())
    mine = [r for r in caplog.records if "434343" in r.getMessage()]
    assert mine[0].exc_info is not None
