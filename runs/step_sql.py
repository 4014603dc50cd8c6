"""The hot path's SQL (ADR 0010): the three statements a steady-state step writes besides its audit
event, built once per column set and executed without the ORM's per-call query compilation (which
cost more CPU than the database did). Values are still adapted by each model field
(`get_db_prep_save`), so what is stored is exactly what `Model.objects.create/update` would store,
on PostgreSQL and SQLite alike."""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from operator import itemgetter
from types import SimpleNamespace

from django.db import DatabaseError, connection

from audit.models import AuditStreamHead
from audit.services import audit_event_fields
from cases.models import Case
from runs.models import AgentRun, Checkpoint, Step

logger = logging.getLogger(__name__)


class Increment:
    """`column = column + amount` in an UPDATE."""

    def __init__(self, amount: int):
        self.amount = amount


def _increments(values: dict) -> frozenset:
    return frozenset(name for name, value in values.items() if isinstance(value, Increment))


def _plain(value):
    """The parameter an UPDATE value stands for: the amount, or itself."""
    return value.amount if isinstance(value, Increment) else value


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
def _run_update_sql(names: tuple[str, ...], increments: frozenset) -> tuple[str, tuple]:
    fields = tuple(AgentRun._meta.get_field(name) for name in names)
    sets = ", ".join(f"{_qn(field.column)} = {_qn(field.column)} + %s" if field.name in increments
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
    increments = _increments(values)
    sql, fields = _run_update_sql(tuple(values), increments)
    params = [values[field.name].amount if field.name in increments
              else field.get_db_prep_save(_plain(values[field.name]), connection) for field in fields]
    params += [run_id, worker_id, status, sequence, version]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@lru_cache(maxsize=64)
def _step_commit_sql(run_names: tuple[str, ...], increments: frozenset,
                     step_names: tuple[str, ...], checkpoint_names: tuple[str, ...]) -> tuple[str, tuple, tuple, tuple]:

    update_sql, run_fields = _run_update_sql(run_names, increments)
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
    increments = _increments(values)
    sql, run_fields, step_fields, checkpoint_fields = _step_commit_sql(tuple(values), increments,
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
    """The type a value for `field` is cast to (the one-statement commit reads every value out of
    one JSON parameter, as text). Text for string columns, so an over-long value fails on
    assignment as with the ORM (a cast to varchar(n) would truncate it)."""
    if field.get_internal_type() in _TEXT_TYPES:
        return "text"
    if field.is_relation:
        return field.target_field.rel_db_type(connection)
    return field.db_type(connection)


_DOC = "$1::jsonb"  # the one-statement commit's only parameter: a JSON array of every value


def _slot(field, index: int) -> str:
    """The SQL that reads `field`'s value from element `index` of the JSON array parameter.

    JSON columns get the element itself (JSON null -> SQL NULL: Django stores None as SQL NULL),
    or — for a field with its own encoder — the text that encoder wrote; strings the element's text
    (assigned to varchar(n) it fails when too long, as with the ORM); everything else the text cast
    to the column's type (ints, timestamps in ISO 8601 with their offset, None -> NULL)."""
    from django.db.models import JSONField

    if isinstance(field, JSONField):
        if field.encoder is None:
            return f"NULLIF({_DOC} -> {index}, 'null'::jsonb)"
        return f"({_DOC} ->> {index})::jsonb"
    if field.get_internal_type() in _TEXT_TYPES:
        return f"({_DOC} ->> {index})"
    if (field.target_field if field.is_relation else field).get_internal_type() not in _JSON_TEXT_TYPES:
        # A type whose JSON text does not cast back exactly (floats, decimals, dates, UUIDs ...):
        # none is written by a step today; such a step is committed the ordinary way.
        raise NotImplementedError(f"{field} cannot travel in the one-statement commit's JSON parameter")
    return f"({_DOC} ->> {index})::{_cast(field)}"


# Types whose values the JSON array carries exactly: ints and bools as JSON, datetimes as ISO 8601 text.
_JSON_TEXT_TYPES = ("AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField",
                    "SmallIntegerField", "PositiveIntegerField", "PositiveBigIntegerField",
                    "PositiveSmallIntegerField", "BooleanField", "DateTimeField")


class _Section:
    """How one dict of values (run, step, checkpoint or event) becomes elements of the JSON array:
    its values in field order, datetimes as ISO 8601 text, an Increment as its amount,
    a JSON value with its field's own encoder as the text that encoder writes. Everything else
    (ints, strings, None, JSON values) is encoded by json.dumps as Django's JSONField would."""

    def __init__(self, fields: tuple, keys: tuple, start: int, increments=frozenset()):
        from django.db.models import DateTimeField, JSONField

        self.keys = keys
        self.slots = tuple(_slot(field, start + i) for i, field in enumerate(fields))
        self._get = itemgetter(*keys) if len(keys) > 1 else (lambda values, key=keys[0]: (values[key],))
        self._times = tuple(i for i, field in enumerate(fields) if isinstance(field, DateTimeField))
        self._unwrap = tuple(i for i, field in enumerate(fields) if field.name in increments)
        self._encoded = tuple((i, field.encoder) for i, field in enumerate(fields)
                              if isinstance(field, JSONField) and field.encoder is not None)

    def extend(self, doc: list, values) -> None:
        row = list(self._get(values))
        for i in self._times:
            if row[i] is not None:
                row[i] = row[i].isoformat()
        for i in self._unwrap:
            row[i] = _plain(row[i])
        for i, encoder in self._encoded:
            if row[i] is not None:
                row[i] = json.dumps(row[i], cls=encoder)
        doc += row


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


def _prepared_cursor(db):
    """A cursor that sends the statement as a server-side prepared statement with $n parameters
    (psycopg's RawCursor, prepare=True), behind Django's cursor wrapper so execute wrappers and
    query logging still see it. Per step this spares psycopg parsing the SQL for placeholders and
    PostgreSQL parsing and planning the statement: it is prepared once per connection (Django
    leaves psycopg's automatic preparation off).

    The psycopg cursor is made once per connection and reused (a new one per step cost ~25 µs of
    CPU: its adapters are looked up afresh); Django's wrapper around it is made per call, as
    Django makes it (so query logging switched on later is honoured), and the caller does not
    close it."""
    db.ensure_connection()
    raw = db.connection
    cached = db.__dict__.get("_step_commit_cursor")
    if cached is None or cached[0] is not raw or cached[1].closed:
        if raw.prepare_threshold is None:
            # Django turns psycopg's statement preparation off (None), which also ignores prepare=True.
            # A threshold no statement reaches keeps every other query unprepared, as Django wants.
            raw.prepare_threshold = 2**31
        cached = db.__dict__["_step_commit_cursor"] = (raw, _prepared_cursor_class()(raw))
    return db._prepare_cursor(cached[1])


_RUN_KEYS = ("id", "lease_owner", "status", "next_sequence", "version")
_HEAD_KEYS = ("new_sequence", "new_hash", "id", "last_sequence", "last_hash")


_PLANS: dict = {}  # (value names, their types, step names, checkpoint names) -> the plan (a handful)


@lru_cache(maxsize=64)
def _step_commit_with_event_sql(run_names: tuple[str, ...], increments: frozenset,
                                step_names: tuple[str, ...], checkpoint_names: tuple[str, ...]) -> tuple:

    def fields_of(model, names):
        return tuple(model._meta.get_field(name) for name in names)

    run_fields = fields_of(AgentRun, run_names)
    step_fields, checkpoint_fields = fields_of(Step, step_names), fields_of(Checkpoint, checkpoint_names)
    event_fields = audit_event_fields()
    sections, start = [], 0
    for fields, keys, extra in ((run_fields, run_names, (increments,)),
                                (fields_of(AgentRun, _RUN_KEYS), _RUN_KEYS, ()),
                                (step_fields, step_names, ()), (checkpoint_fields, checkpoint_names, ()),
                                (fields_of(AuditStreamHead, ("last_sequence", "last_hash", "id", "last_sequence",
                                                             "last_hash")), _HEAD_KEYS, ()),
                                (event_fields, tuple(field.attname for field in event_fields), ())):
        sections.append(_Section(fields, keys, start, *extra))
        start += len(fields)
    run, key, step, checkpoint, head, event = sections

    def columns(fields) -> str:
        return ", ".join(_qn(field.column) for field in fields)

    sets = ", ".join(f"{_qn(field.column)} = {_qn(field.column)} + {slot}" if field.name in increments
                     else f"{_qn(field.column)} = {slot}" for field, slot in zip(run_fields, run.slots, strict=True))
    run_id, lease_owner, status, next_sequence, version = key.slots
    new_sequence, new_hash, head_id, last_sequence, last_hash = head.slots
    # locked -> head -> owned -> step -> checkpoint -> event: each row exists only if the one before
    # it does. `locked` takes the run row's lock if the row is as this worker left it (PostgreSQL
    # re-checks the conditions on the newest version while it waits); the head then advances by
    # compare-and-set only if the run row is locked; the run's UPDATE happens only if the head
    # advanced, and cannot then miss the row it holds locked. So either every row is written or
    # none is, with no error raised: no event id means nothing was written.
    table = _qn(AgentRun._meta.db_table)
    sql = (f"WITH locked AS (SELECT {_qn('id')} FROM {table} WHERE {_qn('id')} = {run_id} "
           f"AND {_qn('lease_owner')} = {lease_owner} AND {_qn('status')} = {status} "
           f"AND {_qn('next_sequence')} = {next_sequence} AND {_qn('cancel_requested_at')} IS NULL "
           f"AND {_qn('version')} = {version} FOR NO KEY UPDATE), "
           f"head AS (UPDATE audit_auditstreamhead SET last_sequence = {new_sequence}, last_hash = {new_hash} "
           f"WHERE id = {head_id} AND last_sequence = {last_sequence} AND last_hash = {last_hash} "
           "AND EXISTS (SELECT 1 FROM locked) RETURNING id), "
           f"owned AS (UPDATE {table} SET {sets} WHERE {_qn('id')} = (SELECT {_qn('id')} FROM locked) "
           f"AND EXISTS (SELECT 1 FROM head) RETURNING {_qn('id')}), "
           f"step AS (INSERT INTO {_qn(Step._meta.db_table)} ({columns(step_fields)}) "
           f"SELECT {', '.join(step.slots)} FROM owned RETURNING {_qn('id')}), "
           f"checkpoint AS (INSERT INTO {_qn(Checkpoint._meta.db_table)} ({columns(checkpoint_fields)}, "
           f"{_qn('step_id')}) SELECT {', '.join(checkpoint.slots)}, step.{_qn('id')} FROM step "
           f"RETURNING {_qn('step_id')}), "
           f"event AS (INSERT INTO audit_auditevent ({columns(event_fields)}) SELECT {', '.join(event.slots)} "
           "FROM checkpoint RETURNING id) "
           "SELECT (SELECT step_id FROM checkpoint), (SELECT id FROM event)")
    return sql, sections


def _step_commit_statement(*, run_id: int, worker_id: str, sequence: int, status: str, version: int, values: dict,
                           step: dict, checkpoint: dict, event: dict, head: tuple[int, int, str]) -> tuple[str, str]:
    """The one-statement commit's SQL (built once per shape) and its one parameter, the JSON array."""
    shape = (tuple(values), tuple(map(type, values.values())), tuple(step), tuple(checkpoint))
    plan = _PLANS.get(shape)
    if plan is None:
        increments = _increments(values)
        if len(_PLANS) >= 256:
            _PLANS.clear()
        try:
            plan = _PLANS[shape] = _step_commit_with_event_sql(shape[0], increments, shape[2], shape[3])
        except NotImplementedError as exc:
            raise StepCommitRefused(str(exc)) from None
    sql, (run, key, step_section, checkpoint_section, head_section, event_section) = plan
    doc: list = []
    run.extend(doc, values)
    doc += (run_id, worker_id, status, sequence, version)
    step_section.extend(doc, step)
    checkpoint_section.extend(doc, checkpoint)
    doc += (event["sequence"], event["hash"], *head)
    event_section.extend(doc, event)
    return sql, json.dumps(doc)


def step_commit_with_event(db, *, run_id: int, worker_id: str, sequence: int, status: str, version: int,
                           values: dict, step: dict, checkpoint: dict, event: dict,
                           head: tuple[int, int, str]) -> tuple[int, int]:
    """PostgreSQL, outside any transaction: the whole steady-state step commit as ONE statement —
    its own transaction, one round trip, one durable commit. The run's conditional UPDATE (also
    requiring `version`: nobody else wrote the row since this worker's last commit), the Step, the
    Checkpoint, and the audit event (`event`: AuditEvent attname -> value, hashed) appended by
    compare-and-set on the stream head `head` (id, last_sequence, last_hash) as this process last
    wrote it. Every value travels in ONE JSON array parameter, read back and cast per column in
    SQL: psycopg adapts one string instead of ~70 values. Returns (step id, event id); raises
    StepCommitRefused — nothing written — when the run row or the head was not as expected. `db`
    is the default database's wrapper itself (the caller has it: each lookup through
    `connections` costs)."""
    sql, doc = _step_commit_statement(run_id=run_id, worker_id=worker_id, sequence=sequence, status=status,
                                      version=version, values=values, step=step, checkpoint=checkpoint, event=event,
                                      head=head)
    try:
        cursor = _prepared_cursor(db)  # reused: not closed
        cursor.execute(sql, [doc])
        step_id, event_id = cursor.fetchone()
    except DatabaseError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != "26000":
            raise
        # invalid_sql_statement_name: the session's prepared statements were reset under us
        # (DISCARD ALL, DEALLOCATE ALL — a pooler). Nothing ran; psycopg has forgotten the statement
        # and prepares it again next time. Commit this step the ordinary way.
        logger.warning("run %s step %s: the step's prepared statement was gone (%s); committing it the "
                       "ordinary way", run_id, sequence, exc)
        raise StepCommitRefused(f"run {run_id} step {sequence}: the prepared statement was reset") from None
    if event_id is None:
        if step_id is not None:  # the statement's chain makes this impossible; never let it pass
            raise RuntimeError(f"run {run_id} step {sequence}: a step row was written without its audit event")
        raise StepCommitRefused(f"run {run_id} step {sequence}: the run row or the audit head moved")
    return step_id, event_id


# --- reading the run -----------------------------------------------------------------------------

@lru_cache(maxsize=4)
def _run_read_plan(vendor: str) -> tuple[str, list, list]:
    """The SQL that reads a run and its case (if any) in one statement, and per model the database's
    and the fields' value converters (what the ORM applies to rows)."""

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
