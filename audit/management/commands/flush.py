"""`flush` that also works on SQLite, where the append-only triggers would abort its DELETEs.

`flush` empties the whole database (it is what Django's transactional tests use between tests).
It is not a way to edit the ledger: on SQLite every trigger is dropped only for the duration of
the wipe and recreated at once from its stored SQL. On PostgreSQL flush uses TRUNCATE, which the
row triggers do not see, so nothing special happens there."""

from django.core.management.commands.flush import Command as FlushCommand
from django.db import connections


class Command(FlushCommand):
    def handle(self, **options):
        connection = connections[options["database"]]
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
