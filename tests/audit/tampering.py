"""Test-only tool to tamper with the ledger the way an attacker with database access could: by
switching the append-only triggers off for a moment. Used to prove audit_verify finds it."""

from contextlib import contextmanager
from io import StringIO

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit.triggers import SQLITE_FORWARD, SQLITE_REVERSE


@contextmanager
def table_triggers_disabled(table: str, noun: str):
    """The same for another app's append-only table (case events, evidence)."""
    from audit.triggers import append_only_statements

    forward, reverse = append_only_statements(table, connection.vendor, noun=noun)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for sql in reverse:
                cursor.execute(sql)
        else:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                for sql in forward:
                    cursor.execute(sql)
            else:
                cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER {table}_append_only")
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")


@contextmanager
def triggers_disabled():
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for sql in SQLITE_REVERSE:
                cursor.execute(sql)
        else:
            # Django's foreign keys are DEFERRABLE INITIALLY DEFERRED: rows inserted earlier in this
            # transaction leave FK checks pending, and PostgreSQL refuses ALTER TABLE while they are.
            # Run them now; they are deferred again once the trigger is back.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_auditevent_no_update_delete")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                for sql in SQLITE_FORWARD:
                    cursor.execute(sql)
            else:
                cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER audit_auditevent_no_update_delete")
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def raw_execute(sql: str, params=()) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def verify(*args):
    """`manage.py audit_verify` in-process: its output, or CommandError carrying stdout and stderr."""
    out, err = StringIO(), StringIO()
    try:
        call_command("audit_verify", *args, stdout=out, stderr=err)
    except CommandError as exc:
        exc.stdout, exc.stderr = out.getvalue(), err.getvalue()
        raise
    return out.getvalue()
