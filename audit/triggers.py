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


def append_only_statements(table: str, vendor: str, *, noun: str) -> tuple[list[str], list[str]]:
    """Forward and reverse SQL that makes `table` append-only at the database level, for other
    apps' written-once tables (case events, evidence). Trigger names: <table>_append_only[_*]."""
    message = f"{noun} are append-only"
    if vendor == "sqlite":
        return (
            [f"CREATE TRIGGER {table}_append_only_update BEFORE UPDATE ON {table} "
             f"BEGIN SELECT RAISE(ABORT, '{message}: UPDATE refused'); END;",
             f"CREATE TRIGGER {table}_append_only_delete BEFORE DELETE ON {table} "
             f"BEGIN SELECT RAISE(ABORT, '{message}: DELETE refused'); END;"],
            [f"DROP TRIGGER IF EXISTS {table}_append_only_update;",
             f"DROP TRIGGER IF EXISTS {table}_append_only_delete;"],
        )
    if vendor == "postgresql":
        return (
            [f"""CREATE OR REPLACE FUNCTION {table}_refuse_change() RETURNS trigger AS $$
                 BEGIN
                   RAISE EXCEPTION '{message}: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
                 END;
                 $$ LANGUAGE plpgsql;""",
             f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
             f"FOR EACH ROW EXECUTE FUNCTION {table}_refuse_change();"],
            [f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};",
             f"DROP FUNCTION IF EXISTS {table}_refuse_change();"],
        )
    raise RuntimeError(f"No append-only trigger for database vendor {vendor!r}.")
