"""`web_audit_timeline_key` (0002) is now the audit event model's own `audit_event_timeline`
(audit 0004 renamed it on PostgreSQL, or built that index if 0002 had not run yet; every index is
written by every audit event: ADR 0010 "Write cost per step"). Should 0002 have run after
audit 0004 (a new database), its now duplicate index is dropped here; backwards, it is put back
as 0002 left it (0002's own reverse drops it)."""

from django.db import migrations, models

TIMELINE = models.Index(fields=["tenant", "created_at", "id"], name="web_audit_timeline_key")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS web_audit_timeline_key")


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(apps.get_model("audit", "AuditEvent"), TIMELINE)


class Migration(migrations.Migration):

    dependencies = [
        ("web", "0005_audit_filter_indexes_postgres"),
        ("audit", "0004_audit_event_fewer_indexes"),
    ]

    operations = [migrations.RunPython(drop, create)]
