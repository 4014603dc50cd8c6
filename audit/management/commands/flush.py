"""`flush` that also works on SQLite, where the append-only triggers would abort its DELETEs, and
that empties PostgreSQL quickly between transactional tests.

`flush` empties the whole database (it is what Django's transactional tests use between tests).
It is not a way to edit the ledger: on SQLite every trigger is dropped only for the duration of
the wipe and recreated at once from its stored SQL. On PostgreSQL Django's flush is one TRUNCATE
of every table, which the row triggers do not see; but a TRUNCATE gives each table and index a new
file, and 63 tables cost seconds where the disk is slow (ADR 0035 addendum). The wipe Django's
transactional tests ask for (no sequence reset, no cascade, no prompt) is therefore a DELETE of
every table in one transaction with the triggers (append-only and foreign-key checks alike) off,
`session_replication_role = replica`, as pg_restore --disable-triggers does: the same empty
tables. Only a superuser may set that; for any other role, and for every other flush (an operator's
`manage.py flush` resets the sequences), Django's TRUNCATE runs as before."""

from importlib import import_module

from django.apps import apps
from django.core.management.commands.flush import Command as FlushCommand
from django.core.management.sql import emit_post_migrate_signal
from django.db import connections, transaction


def can_disable_triggers(connection) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SHOW is_superuser")
        return cursor.fetchone()[0] == "on"


def delete_every_table(connection) -> list[str]:
    """Empty every Django table with DELETE, triggers off; returns the tables emptied."""
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        for table in tables:
            cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")
    return tables


class Command(FlushCommand):
    def handle(self, **options):
        connection = connections[options["database"]]
        if connection.vendor == "postgresql" and self.is_test_wipe(options) and can_disable_triggers(connection):
            return self.delete_wipe(connection, options)
        if connection.vendor != "sqlite":
            return super().handle(**options)
        with connection.cursor() as cursor:
            cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND sql IS NOT NULL")
            triggers = cursor.fetchall()
            for name, _sql in triggers:
                cursor.execute(f'DROP TRIGGER IF EXISTS "{name}"')
        try:
            return super().handle(**options)
        finally:
            with connection.cursor() as cursor:
                for _name, sql in triggers:
                    cursor.execute(sql)

    @staticmethod
    def is_test_wipe(options) -> bool:
        """What TransactionTestCase asks for without available_apps: no prompt, no sequence reset,
        no cascade, post_migrate afterwards."""
        return (not options["interactive"] and not options.get("reset_sequences", True)
                and not options.get("allow_cascade", False) and not options.get("inhibit_post_migrate", False))

    def delete_wipe(self, connection, options) -> None:
        for app_config in apps.get_app_configs():  # as Django's flush: the apps' signal handlers
            try:
                import_module(".management", app_config.name)
            except ImportError:
                pass
        if delete_every_table(connection):
            emit_post_migrate_signal(options["verbosity"], options["interactive"], options["database"])
