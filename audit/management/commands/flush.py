"""`flush` that also works on SQLite, where the append-only triggers would abort its DELETEs.

`flush` empties the whole database (it is what Django's transactional tests use between tests).
It is not a way to edit the ledger: the triggers are dropped only for the duration of the wipe
and recreated at once. On PostgreSQL flush uses TRUNCATE, which the row triggers do not see, so
nothing special happens there."""

from django.core.management.commands.flush import Command as FlushCommand
from django.db import connections

from audit.triggers import SQLITE_FORWARD, SQLITE_REVERSE


class Command(FlushCommand):
    def handle(self, **options):
        connection = connections[options["database"]]
        if connection.vendor != "sqlite":
            return super().handle(**options)
        with connection.cursor() as cursor:
            for sql in SQLITE_REVERSE:
                cursor.execute(sql)
        try:
            return super().handle(**options)
        finally:
            with connection.cursor() as cursor:
                for sql in SQLITE_FORWARD:
                    cursor.execute(sql)
