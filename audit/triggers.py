"""SQL for the append-only triggers (used by migration 0002 and the SQLite-aware flush)."""

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
