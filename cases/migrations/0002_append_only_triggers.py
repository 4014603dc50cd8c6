"""Case events (the log the case is replayed from) and evidence are written once: the database
refuses UPDATE and DELETE on them, as it does for audit events."""

from django.db import migrations

from audit.triggers import append_only_statements

TABLES = [("cases_caseevent", "case events"), ("cases_evidence", "evidence rows")]


def forward(apps, schema_editor):
    for table, noun in TABLES:
        for sql in append_only_statements(table, schema_editor.connection.vendor, noun=noun)[0]:
            schema_editor.execute(sql, params=None)


def reverse(apps, schema_editor):
    for table, noun in TABLES:
        for sql in append_only_statements(table, schema_editor.connection.vendor, noun=noun)[1]:
            schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("cases", "0001_initial"), ("audit", "0002_append_only_triggers")]
    operations = [migrations.RunPython(forward, reverse)]
