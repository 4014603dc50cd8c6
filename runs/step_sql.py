"""The hot path's SQL (ADR 0010): the three statements a steady-state step writes besides its audit
event, built once per column set and executed without the ORM's per-call query compilation (which
cost more CPU than the database did). Values are still adapted by each model field
(`get_db_prep_save`), so what is stored is exactly what `Model.objects.create/update` would store,
on PostgreSQL and SQLite alike."""

from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace

from django.db import DEFAULT_DB_ALIAS, connection, connections

from runs.models import AgentRun


class Increment:
    """`column = column + amount` in an UPDATE."""

    def __init__(self, amount: int):
        self.amount = amount


class Append:
    """`column = column || items` in an UPDATE of a JSON list column (PostgreSQL): the items are
    appended by the database, so a step sends what it adds, not the whole (growing) list."""

    def __init__(self, items: list):
        self.items = items


def _kinds(values: dict) -> tuple[frozenset, frozenset]:
    return (frozenset(name for name, value in values.items() if isinstance(value, Increment)),
            frozenset(name for name, value in values.items() if isinstance(value, Append)))


def _plain(value):
    """The parameter an UPDATE value stands for: the amount, the appended items, or itself."""
    if isinstance(value, Increment):
        return value.amount
    if isinstance(value, Append):
        return value.items
    return value


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


@lru_cache(maxsize=64)
def _insert_sql(model, names: tuple[str, ...]) -> tuple[str, tuple]:
    fields = tuple(model._meta.get_field(name) for name in names)
    columns = ", ".join(_qn(field.column) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    return (f"INSERT INTO {_qn(model._meta.db_table)} ({columns}) VALUES ({placeholders}) "
            f"RETURNING {_qn(model._meta.pk.column)}", fields)


def insert_returning_pk(model, values: dict):
    """INSERT one row of `model` (field name -> Python value) and return its primary key."""
    sql, fields = _insert_sql(model, tuple(values))
    params = [field.get_db_prep_save(values[field.name], connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


@lru_cache(maxsize=64)
def _run_update_sql(names: tuple[str, ...], increments: frozenset, appends: frozenset = frozenset()
                    ) -> tuple[str, tuple]:
    fields = tuple(AgentRun._meta.get_field(name) for name in names)
    sets = ", ".join(f"{_qn(field.column)} = {_qn(field.column)} + %s" if field.name in increments
                     else f"{_qn(field.column)} = {_qn(field.column)} || %s" if field.name in appends
                     else f"{_qn(field.column)} = %s" for field in fields)
    where = (f"{_qn('id')} = %s AND {_qn('lease_owner')} = %s AND {_qn('status')} = %s AND "
             f"{_qn('next_sequence')} = %s AND {_qn('cancel_requested_at')} IS NULL AND {_qn('version')} = %s")
    return f"UPDATE {_qn(AgentRun._meta.db_table)} SET {sets} WHERE {where}", fields


def run_update_if_owned(*, run_id: int, worker_id: str, sequence: int, status: str, version: int,
                        values: dict) -> int:
    """The step's conditional UPDATE of its run row: only while `worker_id` holds the lease, the
    run is `status`, `sequence` is its next step, no cancellation is pending and the row is still
    at `version` (nobody else wrote it since this worker read or committed it). Returns the row
    count (0: lease lost, cancel requested, or another writer)."""
    increments, appends = _kinds(values)
    sql, fields = _run_update_sql(tuple(values), increments, appends)
    params = [values[field.name].amount if field.name in increments
              else field.get_db_prep_save(_plain(values[field.name]), connection) for field in fields]
    params += [run_id, worker_id, status, sequence, version]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@lru_cache(maxsize=64)
def _step_commit_sql(run_names: tuple[str, ...], increments: frozenset, appends: frozenset,
                     step_names: tuple[str, ...], checkpoint_names: tuple[str, ...]) -> tuple[str, tuple, tuple, tuple]:
    from runs.models import Checkpoint, Step

    update_sql, run_fields = _run_update_sql(run_names, increments, appends)
    step_fields = tuple(Step._meta.get_field(name) for name in step_names)
    checkpoint_fields = tuple(Checkpoint._meta.get_field(name) for name in checkpoint_names)
    step_columns = ", ".join(_qn(field.column) for field in step_fields)
    checkpoint_columns = ", ".join(_qn(field.column) for field in checkpoint_fields)
    sql = (f"WITH owned AS ({update_sql} RETURNING {_qn('id')}), "
           f"step AS (INSERT INTO {_qn(Step._meta.db_table)} ({step_columns}) "
           f"SELECT {', '.join(['%s'] * len(step_fields))} FROM owned RETURNING {_qn('id')}) "
           f"INSERT INTO {_qn(Checkpoint._meta.db_table)} ({checkpoint_columns}, {_qn('step_id')}) "
           f"SELECT {', '.join(['%s'] * len(checkpoint_fields))}, step.{_qn('id')} FROM step "
           f"RETURNING {_qn('step_id')}")
    return sql, run_fields, step_fields, checkpoint_fields


def step_commit_if_owned(*, run_id: int, worker_id: str, sequence: int, status: str, version: int, values: dict,
                         step: dict, checkpoint: dict):
    """PostgreSQL: the run's conditional UPDATE, the Step and the Checkpoint in ONE statement (data-
    modifying CTEs): the step and checkpoint rows exist only if the run row matched. Returns the new
    step's id, or None when the run is no longer ours or a cancellation is pending (nothing written)."""
    increments, appends = _kinds(values)
    sql, run_fields, step_fields, checkpoint_fields = _step_commit_sql(tuple(values), increments, appends,
                                                                       tuple(step), tuple(checkpoint))
    params = [values[field.name].amount if field.name in increments
              else field.get_db_prep_save(_plain(values[field.name]), connection) for field in run_fields]
    params += [run_id, worker_id, status, sequence, version]
    params += [field.get_db_prep_save(step[field.name], connection) for field in step_fields]
    params += [field.get_db_prep_save(checkpoint[field.name], connection) for field in checkpoint_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return row[0] if row else None


class StepCommitRefused(Exception):
    """The one-statement step commit wrote nothing: the run row or the audit stream's head was not
    what this worker last committed (lease lost, cancel requested, another writer, a stale head)."""


_TEXT_TYPES = ("CharField", "TextField", "SlugField", "EmailField", "URLField")


def _cast(field) -> str:
    """The type a value for `field` is cast to in an INSERT ... SELECT (with server-side
    parameters a bare NULL or string there would be typed text). Text for string columns, so an
    over-long value fails on assignment as with the ORM (a cast to varchar(n) would truncate it)."""
    if field.get_internal_type() in _TEXT_TYPES:
        return "text"
    if field.is_relation:
        return field.target_field.rel_db_type(connection)
    return field.db_type(connection)


@lru_cache(maxsize=256)
def _preparers(fields: tuple) -> tuple:
    """Per field, how the one-statement commit adapts a value: JSON through the field (what the ORM
    sends: psycopg's Jsonb with the field's encoder), everything else as is — the executor passes
    ints, strings, aware datetimes and None, which is what the ORM would send for them."""
    from django.db.models import JSONField

    return tuple(field if isinstance(field, JSONField) else None for field in fields)


def _prepared(fields_and_preparers: tuple, values: dict, db) -> list:
    fields, preparers = fields_and_preparers
    return [values[field.name] if json is None else json.get_db_prep_save(values[field.name], db)
            for field, json in zip(fields, preparers, strict=True)]


def _numbered(sql: str) -> str:
    """%s placeholders -> $1, $2, ... (the SQL has no other %)."""
    parts = sql.split("%s")
    return "".join(part + (f"${index}" if index < len(parts) else "") for index, part in enumerate(parts, start=1))


@lru_cache(maxsize=1)
def _prepared_cursor_class():
    import psycopg

    class PreparedRawCursor(psycopg.RawCursor):
        def execute(self, query, params=None, *, prepare=None, binary=None):
            try:
                return super().execute(query, params, prepare=True, binary=binary)
            finally:
                if self._query is None:
                    # A prepared execution leaves the statement unrecorded; Django's query log (and
                    # so the tests that count statements) reads it from here.
                    self._query = SimpleNamespace(query=query.encode())

    return PreparedRawCursor


def _prepared_cursor():
    """A cursor that sends the statement as a server-side prepared statement with $n parameters
    (psycopg's RawCursor, prepare=True), behind Django's cursor wrapper so execute wrappers and
    query logging still see it. Per step this spares psycopg parsing the SQL for placeholders and
    quoting ~70 values into it, and PostgreSQL parsing and planning the statement: it is prepared
    once per connection (Django leaves psycopg's automatic preparation off)."""
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        # Django turns psycopg's statement preparation off (None), which also ignores prepare=True.
        # A threshold no statement reaches keeps every other query unprepared, as Django wants.
        raw.prepare_threshold = 2**31
    return connection._prepare_cursor(_prepared_cursor_class()(raw))


@lru_cache(maxsize=64)
def _step_commit_with_event_sql(run_names: tuple[str, ...], increments: frozenset, appends: frozenset,
                                step_names: tuple[str, ...], checkpoint_names: tuple[str, ...]) -> tuple:
    from audit.services import audit_event_fields
    from runs.models import Checkpoint, Step

    update_sql, run_fields = _run_update_sql(run_names, increments, appends)
    step_fields = tuple(Step._meta.get_field(name) for name in step_names)
    checkpoint_fields = tuple(Checkpoint._meta.get_field(name) for name in checkpoint_names)
    event_fields = audit_event_fields()

    def columns(fields) -> str:
        return ", ".join(_qn(field.column) for field in fields)

    def values(fields) -> str:
        return ", ".join(f"%s::{_cast(field)}" for field in fields)

    # owned -> step -> checkpoint -> head -> event: each row exists only if the one before it does.
    # The final division by zero aborts the whole statement (and so its implicit transaction) unless
    # the event was written: a step is never committed without its audit event, nor half of it.
    sql = (f"WITH owned AS ({update_sql} RETURNING {_qn('id')}), "
           f"step AS (INSERT INTO {_qn(Step._meta.db_table)} ({columns(step_fields)}) "
           f"SELECT {values(step_fields)} FROM owned RETURNING {_qn('id')}), "
           f"checkpoint AS (INSERT INTO {_qn(Checkpoint._meta.db_table)} ({columns(checkpoint_fields)}, "
           f"{_qn('step_id')}) SELECT {values(checkpoint_fields)}, step.{_qn('id')} FROM step "
           f"RETURNING {_qn('step_id')}), "
           "head AS (UPDATE audit_auditstreamhead SET last_sequence = %s, last_hash = %s "
           "WHERE id = %s AND last_sequence = %s AND last_hash = %s AND EXISTS (SELECT 1 FROM checkpoint) "
           "RETURNING id), "
           f"event AS (INSERT INTO audit_auditevent ({columns(event_fields)}) SELECT {values(event_fields)} "
           "FROM head RETURNING id) "
           "SELECT (SELECT step_id FROM checkpoint), (SELECT id FROM event), 1 / (SELECT count(*) FROM event)")
    return (_numbered(sql), (run_fields, _preparers(run_fields)), (step_fields, _preparers(step_fields)),
            (checkpoint_fields, _preparers(checkpoint_fields)), (event_fields, _preparers(event_fields)))


def step_commit_with_event(*, run_id: int, worker_id: str, sequence: int, status: str, version: int, values: dict,
                           step: dict, checkpoint: dict, event, head: tuple[int, int, str]) -> tuple[int, int]:
    """PostgreSQL, outside any transaction: the whole steady-state step commit as ONE statement —
    its own transaction, one round trip, one durable commit. The run's conditional UPDATE (also
    requiring `version`: nobody else wrote the row since this worker's last commit), the Step, the
    Checkpoint, and the audit event appended by compare-and-set on the stream head `head` (id,
    last_sequence, last_hash) as this process last wrote it. Returns (step id, event id); raises
    StepCommitRefused — with nothing written — when any of it did not match."""
    from django.db import DataError

    increments, appends = _kinds(values)
    sql, run_fields, step_fields, checkpoint_fields, event_fields = _step_commit_with_event_sql(
        tuple(values), increments, appends, tuple(step), tuple(checkpoint))
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: each access through the proxy costs
    params = _prepared(run_fields, {name: _plain(value) for name, value in values.items()}, db)
    params += [run_id, worker_id, status, sequence, version]
    params += _prepared(step_fields, step, db)
    params += _prepared(checkpoint_fields, checkpoint, db)
    head_id, last_sequence, last_hash = head
    params += [event.sequence, event.hash, head_id, last_sequence, last_hash]
    params += _prepared(event_fields, {field.name: getattr(event, field.attname) for field in event_fields[0]}, db)
    try:
        with _prepared_cursor() as cursor:
            cursor.execute(sql, params)
            step_id, event_id, _ = cursor.fetchone()
    except DataError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != "22012":  # division_by_zero: our refusal
            raise
        raise StepCommitRefused(f"run {run_id} step {sequence}: the run row or the audit head moved") from None
    return step_id, event_id


# --- reading the run -----------------------------------------------------------------------------

@lru_cache(maxsize=4)
def _run_read_plan(vendor: str) -> tuple[str, list, list]:
    """The SQL that reads a run and its case (if any) in one statement, and per model the database's
    and the fields' value converters (what the ORM applies to rows)."""
    from cases.models import Case

    plans, selected = [], []
    for alias, model in (("r", AgentRun), ("c", Case)):
        converters = []
        for field in model._meta.concrete_fields:
            column = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
            if found:
                converters.append((len(selected), column, found))
            selected.append(f"{alias}.{connection.ops.quote_name(field.column)}")
        plans.append((model, [field.attname for field in model._meta.concrete_fields], converters))
    sql = (f"SELECT {', '.join(selected)} FROM {AgentRun._meta.db_table} r "
           f"LEFT JOIN {Case._meta.db_table} c ON c.id = r.case_id WHERE r.id = %s")
    return sql, plans, [len(AgentRun._meta.concrete_fields)]


def read_run(run_id: int) -> AgentRun | None:
    """The run row and its case, in one statement with SQL built once (compiling an ORM query per
    step cost more CPU than the database spent answering it); rows built with `Model.from_db`."""
    sql, plans, (split,) = _run_read_plan(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for _model, _names, converters in plans:
        for index, column, functions in converters:
            if values[index] is not None or index < split:
                for function in functions:
                    values[index] = function(values[index], column, connection)
    (run_model, run_names, _), (case_model, case_names, _) = plans
    run = run_model.from_db("default", run_names, values[:split])
    if run.case_id:
        run.case = case_model.from_db("default", case_names, values[split:])
    return run
