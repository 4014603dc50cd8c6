"""Fewer indexes on the audit ledger, each written by every event (ADR 0010 "Write cost
per step"): the tenant's own FK index and (tenant, created_at) are covered by (tenant, created_at,
id), which now lives here: on PostgreSQL, where web 0002 built the identical `web_audit_timeline_key`,
that index is renamed rather than a second one built (no index build on a large ledger);
the plain `action` index is covered on PostgreSQL by web's `action varchar_pattern_ops` index.

SQLite alters the table by rebuilding it, which drops its append-only triggers (0002): they are
put back after the change, in either direction."""

import django.db.models.deletion
from django.db import migrations, models

from audit.triggers import SQLITE_FORWARD, SQLITE_REVERSE


def restore_sqlite_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_REVERSE + SQLITE_FORWARD:
            schema_editor.execute(sql, params=None)


TIMELINE = models.Index(fields=["tenant", "created_at", "id"], name="audit_event_timeline")


def _web_timeline_exists(schema_editor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('web_audit_timeline_key') IS NOT NULL")
        return cursor.fetchone()[0]


def add_timeline(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql" and _web_timeline_exists(schema_editor):
        schema_editor.execute("ALTER INDEX web_audit_timeline_key RENAME TO audit_event_timeline")
    else:
        schema_editor.add_index(apps.get_model("audit", "AuditEvent"), TIMELINE)


def remove_timeline(apps, schema_editor):
    schema_editor.remove_index(apps.get_model("audit", "AuditEvent"), TIMELINE)


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_api_keys_and_service_accounts'),
        ('audit', '0003_audit_verified_head'),
    ]

    operations = [
        migrations.RunPython(restore_sqlite_triggers, restore_sqlite_triggers),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name='auditevent', index=TIMELINE)],
            database_operations=[migrations.RunPython(add_timeline, remove_timeline)],
        ),
        migrations.RemoveIndex(
            model_name='auditevent',
            name='audit_audit_tenant__290b62_idx',
        ),
        migrations.RemoveIndex(
            model_name='auditevent',
            name='audit_audit_action_203f66_idx',
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='tenant',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='accounts.tenant'),
        ),
        migrations.RunPython(restore_sqlite_triggers, restore_sqlite_triggers),
    ]
