"""A command that uses the database refuses, saying what to do, when the database is not migrated or
does not answer — before it reads or writes anything (core.commands.DatabaseCommand)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError
from django.db import OperationalError

from accounts.models import ApiKey, Tenant, User
from audit.models import AuditEvent
from cases.models import Case
from core import commands
from tests.helpers import assert_nothing_changed

ROOT = Path(__file__).resolve().parents[2]
# Ours that never open the database: they read files only.
NO_DATABASE = {"redaction_report", "train_analyst"}
# Django's own, overridden by ours: runserver warns of unapplied migrations itself, flush empties the
# tables there are.
DJANGOS_OWN = {"runserver", "flush"}


def _rows():
    return (Tenant.objects.count(), User.objects.count(), Case.objects.count(), AuditEvent.objects.count())


@pytest.fixture
def forget_the_check(monkeypatch):
    """This process has found the test database migrated; make each command check again."""
    monkeypatch.setattr(commands, "_migrated", set())


def test_every_command_of_ours_that_uses_the_database_checks_it_first():
    ours = {name for name, app in get_commands().items()
            if not app.startswith("django") and (ROOT / app.replace(".", "/")).is_dir()}
    assert {"evaluate", "seed_demo", "run_cancel", "api_key", "import_complaints"} <= ours
    unchecked = sorted(name for name in ours - NO_DATABASE - DJANGOS_OWN
                       if not isinstance(load_command_class(get_commands()[name], name), commands.DatabaseCommand))
    assert unchecked == []
    assert DJANGOS_OWN <= ours and NO_DATABASE <= ours


@pytest.mark.django_db
def test_a_migrated_database_passes_and_the_answer_is_kept(forget_the_check, monkeypatch):
    commands.require_migrated()
    monkeypatch.setattr(commands, "unapplied_migrations", lambda alias="default": pytest.fail("checked twice"))
    commands.require_migrated()


@pytest.mark.django_db
def test_an_unmigrated_database_is_refused_with_what_to_do_and_nothing_changes(forget_the_check, monkeypatch,
                                                                               tenant):
    monkeypatch.setattr(commands, "unapplied_migrations", lambda alias="default": ["cases.0099_next", "runs.0099_x"])
    with assert_nothing_changed(extra={"keys": lambda: ApiKey.objects.count(), "rows": _rows}):
        with pytest.raises(CommandError, match=r"lacks 2 migration\(s\) \(first: cases.0099_next\). Run "
                                               r"`python manage.py migrate` first"):
            call_command("api_key", "create", "ci", "--tenant", tenant.slug, "--role", "analyst")
        with pytest.raises(CommandError, match="migrate"):
            call_command("seed_demo")
    assert commands._migrated == set()  # a refusal is not remembered: migrate, then run it again


@pytest.mark.django_db
def test_a_database_that_does_not_answer_is_refused_with_what_to_do(forget_the_check, monkeypatch):
    def down(alias="default"):
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")

    monkeypatch.setattr(commands, "unapplied_migrations", down)
    with assert_nothing_changed(extra={"rows": _rows}), pytest.raises(
            CommandError, match="does not answer .*Connection refused.*Start it, or point DATABASE_URL"):
        call_command("seed_demo")


@pytest.mark.slow  # starts manage.py
@pytest.mark.engine_independent  # its own empty SQLite file
def test_evaluate_before_migrate_says_so_in_one_line_and_creates_no_table(tmp_path):
    database = tmp_path / "fresh.sqlite3"
    env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings",
           "DATABASE_URL": f"sqlite:///{database}"}
    result = subprocess.run([sys.executable, "manage.py", "evaluate", "--split", "blind", "--limit", "1"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"CommandError: The database “{database}” lacks ")
    assert "Run `python manage.py migrate` first" in result.stderr
    tables = sqlite3.connect(database).execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert tables == []
