"""The base of our management commands that use the database.

Run before `manage.py migrate` (a fresh checkout, a new DATABASE_URL) or against a database that does
not answer, a command would die in its first query with a traceback naming a missing table. A
`DatabaseCommand` checks first and stops with a CommandError that says what to do — before anything
is read or written. The check runs once per process and database: the migration graph takes a
moment to load, and a migrated database stays migrated."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

_migrated: set[str] = set()  # database aliases found fully migrated by this process


def unapplied_migrations(alias: str = DEFAULT_DB_ALIAS) -> list[str]:
    """The migrations the database still lacks ("app.name"), in the order migrate would apply them."""
    executor = MigrationExecutor(connections[alias])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]


def _described(settings: dict) -> str:
    """“arbiter” on 127.0.0.1:5432, or “/path/to/arbiter.sqlite3”: which database, as the operator set it."""
    where = ":".join(str(part) for part in (settings.get("HOST"), settings.get("PORT")) if part)
    return f"“{settings.get('NAME')}”" + (f" on {where}" if where else "")


def require_migrated(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Raise CommandError, saying what to do, unless the database answers and is fully migrated."""
    if alias in _migrated:
        return
    name = _described(connections[alias].settings_dict)
    try:
        missing = unapplied_migrations(alias)
    except DatabaseError as exc:
        raise CommandError(f"The database {name} does not answer ({exc}). Start it, or point DATABASE_URL "
                           "at one that runs, and run the command again.") from None
    if missing:
        raise CommandError(f"The database {name} lacks {len(missing)} migration(s) (first: {missing[0]}). "
                           "Run `python manage.py migrate` first (`make run` does it), then this command again.")
    _migrated.add(alias)


class DatabaseCommand(BaseCommand):
    """A management command that reads or writes the database (module docstring)."""

    def execute(self, *args, **options):
        require_migrated()
        return super().execute(*args, **options)
