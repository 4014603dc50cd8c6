"""The database itself refuses UPDATE and DELETE on audit events, whoever connects (raw SQL
included). On PostgreSQL TRUNCATE is not refused, so that test databases can still be flushed;
an operator's TRUNCATE is a privilege question (revoke it from the application role)."""

from django.db import migrations

SQLITE_FORWARD = [
    """CREATE TRIGGER audit_auditevent_no_update BEFORE UPDATE ON audit_auditevent
       BEGIN SELECT RAISE(ABORT, 'audit events are append-only: UPDATE refused'); END;""",
    """CREATE TRIGGER audit_auditevent_no_delete BEFORE DELETE ON audit_auditevent
       BEGIN SELECT RAISE(ABORT, 'audit events are append-only: DELETE refused'); END;""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS audit_auditevent_no_update;",
    "DROP TRIGGER IF EXISTS audit_auditevent_no_delete;",
]
POSTGRES_FORWARD = [
    """CREATE OR REPLACE FUNCTION audit_auditevent_refuse_change() RETURNS trigger AS $$
       BEGIN
         RAISE EXCEPTION 'audit events are append-only: % refused', TG_OP
           USING ERRCODE = 'insufficient_privilege';
       END;
       $$ LANGUAGE plpgsql;""",
    """CREATE TRIGGER audit_auditevent_no_update_delete BEFORE UPDATE OR DELETE ON audit_auditevent
       FOR EACH ROW EXECUTE FUNCTION audit_auditevent_refuse_change();""",
]
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS audit_auditevent_no_update_delete ON audit_auditevent;",
    "DROP FUNCTION IF EXISTS audit_auditevent_refuse_change();",
]


def forward(apps, schema_editor):
    statements = {"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}.get(schema_editor.connection.vendor)
    if statements is None:
        raise RuntimeError(f"No append-only trigger for database vendor {schema_editor.connection.vendor!r}.")
    for sql in statements:
        schema_editor.execute(sql)


def reverse(apps, schema_editor):
    for sql in {"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}[schema_editor.connection.vendor]:
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(forward, reverse)]
