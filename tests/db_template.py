"""The test database, migrated once and cloned: each pytest-xdist worker (and each run of the suite)
gets a copy of a template built by running the migrations once.

The template is named after a fingerprint of every migration file of every installed app (ours
and third-party), so it is rebuilt exactly when a migration changes, and kept between runs
otherwise. Building it is serialised between workers (an advisory lock on PostgreSQL, a file lock
on SQLite) and atomic: it is built under a temporary name and renamed when complete, so a worker
never clones a half-migrated template.

- PostgreSQL: the template is a database `test_<NAME>_template_<fingerprint>`; each worker's
  database (`test_<NAME>_gw0`, …) is `CREATE DATABASE … TEMPLATE` it, dropped at the end.
- SQLite: the template is a file under var/test/; each worker's in-memory test database is filled
  from it with SQLite's backup API (a page copy, no SQL replayed).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sqlite3
from pathlib import Path

import psycopg
from django.apps import apps
from django.conf import settings
from django.db import connections
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
SQLITE_TEMPLATES = ROOT / "var" / "test"


def migrations_fingerprint() -> str:
    """sha256 (12 hex digits) over the path and bytes of every migration module of every app."""
    digest = hashlib.sha256()
    for app in sorted(apps.get_app_configs(), key=lambda config: config.label):
        folder = Path(app.path) / "migrations"
        for path in sorted(folder.glob("*.py")):
            digest.update(f"{app.label}/{path.name}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _test_name(settings_dict: dict) -> str:
    return settings_dict["TEST"].get("NAME") or f"test_{settings_dict['NAME']}"


def _point_at(connection, name: str) -> None:
    connection.close()
    connection.settings_dict["NAME"] = name
    settings.DATABASES[connection.alias]["NAME"] = name


def _migrate_into(connection, name: str) -> None:
    """Django's own test-database creation (create, migrate, cache table) under `name`."""
    connection.settings_dict["TEST"]["NAME"] = name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=False)
    connection.close()


# --- PostgreSQL ------------------------------------------------------------------------------------

def _admin(settings_dict: dict) -> psycopg.Connection:
    return psycopg.connect(host=settings_dict["HOST"] or "127.0.0.1", port=settings_dict["PORT"] or 5432,
                           user=settings_dict["USER"] or None, password=settings_dict["PASSWORD"] or None,
                           dbname="postgres", autocommit=True)


def _pg_exists(admin, name: str) -> bool:
    return admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def _pg_drop(admin, name: str) -> None:
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _pg_setup(connection) -> str:
    settings_dict = connection.settings_dict
    worker_name = _test_name(settings_dict)
    prefix = f"test_{settings_dict['NAME']}_template_"
    template = prefix + migrations_fingerprint()
    with _admin(settings_dict) as admin:
        admin.execute("SELECT pg_advisory_lock(hashtext(%s))", [prefix])
        try:
            if not _pg_exists(admin, template):
                building = template + "_building"
                _pg_drop(admin, building)
                _migrate_into(connection, building)
                admin.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(building), sql.Identifier(template)))
                stale = admin.execute("SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s",
                                      [prefix.replace("_", r"\_") + "%", template]).fetchall()
                for (name,) in stale:  # templates of other migrations: rebuilt when needed again
                    _pg_drop(admin, name)
            _pg_drop(admin, worker_name)
            admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(worker_name), sql.Identifier(template)))
        finally:
            admin.execute("SELECT pg_advisory_unlock(hashtext(%s))", [prefix])
    _point_at(connection, worker_name)
    return worker_name


def _pg_teardown(connection, original_name: str, worker_name: str) -> None:
    connection.close()
    with _admin(connection.settings_dict) as admin:
        _pg_drop(admin, worker_name)
    _point_at(connection, original_name)


# --- SQLite ----------------------------------------------------------------------------------------

@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sqlite_template() -> Path:
    template = SQLITE_TEMPLATES / f"template-{migrations_fingerprint()}.sqlite3"
    with _file_lock(SQLITE_TEMPLATES / "template.lock"):
        if not template.exists():
            building = template.with_suffix(f".building-{os.getpid()}")
            building.unlink(missing_ok=True)
            _migrate_into(connections["default"], str(building))
            with sqlite3.connect(building) as raw:  # one self-contained file: no -wal beside it
                raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                raw.execute("PRAGMA journal_mode=DELETE")
            building.replace(template)
            for stale in SQLITE_TEMPLATES.glob("template-*.sqlite3"):
                if stale != template:
                    stale.unlink(missing_ok=True)
    return template


def _sqlite_setup(connection) -> str:
    template = _sqlite_template()
    memory = f"file:memorydb_{connection.alias}?mode=memory&cache=shared"
    _point_at(connection, memory)
    connection.ensure_connection()  # an in-memory database lives as long as this connection
    with sqlite3.connect(template) as source:
        source.backup(connection.connection)
    return memory


# --- the fixture's two halves ----------------------------------------------------------------------

def setup_test_database() -> tuple[str, str]:
    """Point the default connection at a fresh copy of the migrated template; returns what teardown needs."""
    connection = connections["default"]
    original_name = connection.settings_dict["NAME"]
    if connection.vendor == "postgresql":
        return original_name, _pg_setup(connection)
    if connection.vendor == "sqlite":
        return original_name, _sqlite_setup(connection)
    raise RuntimeError(f"no test-database template for {connection.vendor}")


def teardown_test_database(names: tuple[str, str]) -> None:
    original_name, worker_name = names
    connection = connections["default"]
    if connection.vendor == "postgresql":
        _pg_teardown(connection, original_name, worker_name)
    else:
        connection.close()
        _point_at(connection, original_name)
