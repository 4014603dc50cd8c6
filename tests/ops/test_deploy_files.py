"""Process supervision ships with the code: systemd units for web, worker and beat that restart on
failure, and a Procfile with the same three processes."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string((ROOT / "deploy" / "systemd" / f"arbiter-{name}.service").read_text())
    return parser


@pytest.mark.parametrize(("name", "command"), [("web", "gunicorn config.wsgi:application"),
                                               ("worker", "celery -A config worker"),
                                               ("beat", "celery -A config beat")])
def test_each_process_has_a_systemd_unit_that_restarts_it_on_failure(name, command):
    unit = _unit(name)
    service = unit["Service"]
    assert service["Restart"] == "on-failure"
    assert int(service["RestartSec"]) >= 1 and int(unit["Unit"]["StartLimitBurst"]) >= 1
    assert command in service["ExecStart"]
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert "ARBITER_VAR_DIR=" in (ROOT / "deploy" / "systemd" / f"arbiter-{name}.service").read_text()


def test_the_worker_unit_gives_a_step_time_to_finish_on_stop(settings):
    timeout = int(_unit("worker")["Service"]["TimeoutStopSec"])
    assert timeout > settings.ARBITER_RUN_STEP_SOFT_TIME_LIMIT


def test_the_procfile_runs_web_worker_and_beat_and_migrates_on_release():
    entries = dict(line.split(":", 1) for line in (ROOT / "Procfile").read_text().splitlines()
                   if line and not line.startswith("#"))
    assert set(entries) == {"release", "web", "worker", "beat"}
    assert "manage.py migrate" in entries["release"]
    assert "--config config/gunicorn.conf.py" in entries["web"]
    assert "celery -A config worker" in entries["worker"] and "celery -A config beat" in entries["beat"]
