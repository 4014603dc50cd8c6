"""SQLite shared by several processes (`make run`: web, worker, beat, and a manage.py command
beside them): WAL mode, a busy timeout and BEGIN IMMEDIATE mean concurrent writers wait for each
other instead of failing with "database is locked".

Runs a child interpreter on a file database of its own (the test database is in memory)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # each test starts processes of its own (writers, evaluate)

WRITERS = textwrap.dedent("""
    import sys, threading, time
    import django
    django.setup()
    from django.core.management import call_command
    from django.db import connection, connections, transaction
    from outbox.models import WorkerHeartbeat
    from django.utils import timezone

    call_command("migrate", "outbox", verbosity=0)
    print("journal", connection.cursor().execute("PRAGMA journal_mode").fetchone()[0])
    print("busy_timeout", connection.cursor().execute("PRAGMA busy_timeout").fetchone()[0])
    connections.close_all()
    errors = []

    def writer(name, hold):
        try:
            for index in range(15):
                with transaction.atomic():
                    # read first, then write: under a deferred BEGIN this upgrade is what fails
                    WorkerHeartbeat.objects.filter(name=name).exists()
                    now = timezone.now()
                    WorkerHeartbeat.objects.update_or_create(
                        name=name, defaults={"pid": index, "started_at": now, "last_seen_at": now})
                    time.sleep(hold)
        except Exception as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(f"w{n}", 0.02 * (n + 1))) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("rows", WorkerHeartbeat.objects.count())
    print("errors", errors)
""")


@pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3",
                    reason="SQLite only: PostgreSQL has row locks")
def test_concurrent_sqlite_writers_never_see_database_is_locked(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'shared.sqlite3'}", "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "1", "ARBITER_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", WRITERS], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["journal"] == "wal"
    assert int(lines["busy_timeout"]) >= 10_000
    assert lines["rows"] == "3"
    assert lines["errors"] == "[]", lines["errors"]
    assert "database is locked" not in done.stderr


EVALUATE_BESIDE = textwrap.dedent("""
    import sqlite3, tempfile
    import django
    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction
    from analyst.management.commands.evaluate import use_private_sqlite_copy
    from outbox.models import WorkerHeartbeat
    from django.utils import timezone

    call_command("migrate", "outbox", verbosity=0)
    original = connection.settings_dict["NAME"]
    with tempfile.TemporaryDirectory() as directory:
        copy = use_private_sqlite_copy(directory)
        print("copied", copy is not None and str(copy) != original)
        with transaction.atomic():  # the evaluation's long transaction, on the copy
            now = timezone.now()
            WorkerHeartbeat.objects.create(name="evaluation", started_at=now, last_seen_at=now)
            beside = sqlite3.connect(original, timeout=0)  # a worker beside it must not wait at all
            beside.execute("UPDATE outbox_workerheartbeat SET pid = 7")
            beside.commit()
            beside.close()
            transaction.set_rollback(True)
    print("written beside", sqlite3.connect(original).execute("SELECT count(*) FROM outbox_workerheartbeat").fetchone()[0])
""")


@pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3",
                    reason="SQLite only: PostgreSQL has row locks")
def test_evaluate_runs_on_a_private_copy_so_writers_beside_it_never_wait(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env |= {"DATABASE_URL": f"sqlite:///{tmp_path / 'shared.sqlite3'}", "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "1", "ARBITER_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", EVALUATE_BESIDE], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["copied True", "written beside 0"]
