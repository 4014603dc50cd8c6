"""The hot path's SQL (ADR 0010): the three statements a steady-state step writes besides its audit
event, built once per column set and executed without the ORM's per-call query compilation (which
cost more CPU than the database did). Values are still adapted by each model field
(`get_db_prep_save`), so what is stored is exactly what `Model.objects.create/update` would store,
on PostgreSQL and SQLite alike."""

from __future__ import annotations

import logging
from functools import lru_cache

from django.db import connection

from runs.models import AgentRun

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
    from runs.models import Checkpoint, Step

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
