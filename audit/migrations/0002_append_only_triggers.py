"""The database itself refuses UPDATE and DELETE on audit events, whoever connects (raw SQL
included). On PostgreSQL TRUNCATE is not refused, so that test databases can still be flushed;
an operator's TRUNCATE is a privilege question (revoke it from the application role)."""

from django.db import migrations

from audit.triggers import POSTGRES_FORWARD, POSTGRES_REVERSE, SQLITE_FORWARD, SQLITE_REVERSE


def forward(apps, schema_editor):
    statements = {"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}.get(schema_editor.connection.vendor)
    if statements is None:
        raise RuntimeError(f"No append-only trigger for database vendor {schema_editor.connection.vendor!r}.")
    for sql in statements:
        schema_editor.execute(sql, params=None)


def reverse(apps, schema_editor):
    for sql in {"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}[schema_editor.connection.vendor]:
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(forward, reverse)]
