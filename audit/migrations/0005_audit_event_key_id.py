"""Keyed chain hashes (ADR 0017): each event records the key id its hash is an HMAC under; every
stream whose last event is unkeyed gets its keyed cut-over event (audit.cutover), so the events
written before keep their plain hashes and everything after is keyed.

SQLite adds the column by rebuilding the table, which drops its append-only triggers (0002):
they are put back after the change, in either direction."""

from django.db import migrations, models

from audit.cutover import ledger_cut_over
from audit.triggers import SQLITE_FORWARD, SQLITE_REVERSE


def restore_sqlite_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for sql in SQLITE_REVERSE + SQLITE_FORWARD:
            schema_editor.execute(sql, params=None)


def cut_over(apps, schema_editor):
    ledger_cut_over(apps.get_model("audit", "AuditEvent"), apps.get_model("audit", "AuditStreamHead"))


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0004_audit_event_fewer_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditevent',
            name='key_id',
            field=models.CharField(blank=True, db_default='', default='', max_length=40),
        ),
        migrations.RunPython(restore_sqlite_triggers, restore_sqlite_triggers),
        # Not reversible: the cut-over events are ledger events, and the ledger is append-only.
        migrations.RunPython(cut_over, migrations.RunPython.noop),
    ]
