"""What a step makes the database write besides its rows (ADR 0010 "Write cost per
step"): every index of the tables a step inserts into is written by every step, so none of them may
be redundant, and the run row's per-step UPDATE must find room on its page (PostgreSQL)."""

from __future__ import annotations

import pytest
from django.db import connection

# The tables a steady-state step writes a row into.
STEP_TABLES = ("audit_auditevent", "runs_step", "runs_checkpoint")


def _indexes(table: str) -> dict[str, dict]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return {name: info for name, info in found.items() if info["index"] or info["unique"] or info["primary_key"]}


# Partial indexes hold only rows a steady-state step never writes (its Step is not a fork copy; its
# Checkpoint is a delta, with no snapshot and no compaction), so a step writes no entry in them.
PARTIAL = {
    "audit_auditevent": set(),
    "runs_step": {"runs_step_copied_from_set"},
    "runs_checkpoint": {"checkpoint_snapshots", "checkpoint_compactions"},
}


def _partial_indexes(table: str) -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                           "JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = %s AND i.indpred IS NOT NULL",
                           [table])
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = %s "
                           "AND sql LIKE '%% WHERE %%'", [table])
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db
@pytest.mark.parametrize("table", STEP_TABLES)
def test_the_partial_indexes_on_the_step_tables_are_the_known_rare_row_ones(table):
    assert _partial_indexes(table) == PARTIAL[table]


@pytest.mark.django_db
@pytest.mark.parametrize("table", STEP_TABLES)
def test_no_index_a_step_writes_is_the_leading_part_of_another(table):
    indexes = {name: info for name, info in _indexes(table).items() if name not in _partial_indexes(table)}
    redundant = []
    for name, info in indexes.items():
        if info["unique"] or info["primary_key"]:
            continue  # it enforces something
        columns = list(info["columns"])
        for other, other_info in indexes.items():
            if other != name and list(other_info["columns"])[:len(columns)] == columns:
                redundant.append((name, columns, other))
    assert redundant == []


@pytest.mark.django_db
def test_the_timeline_index_and_the_run_indexes_a_step_relies_on_exist():
    audit = {tuple(info["columns"]) for info in _indexes("audit_auditevent").values()}
    assert ("tenant_id", "created_at", "id") in audit
    for table in ("runs_step", "runs_checkpoint"):
        run_sequence = [info for name, info in _indexes(table).items()
                        if info["columns"] == ["run_id", "sequence"] and name not in PARTIAL[table]]
        assert len(run_sequence) == 1 and run_sequence[0]["unique"]


@pytest.mark.django_db
def test_the_run_table_leaves_room_on_each_page_for_the_steps_update():
    if connection.vendor != "postgresql":
        pytest.skip("fillfactor is a PostgreSQL storage parameter")
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'runs_agentrun'")
        assert "fillfactor=70" in (cursor.fetchone()[0] or [])


@pytest.mark.django_db
def test_the_run_row_a_step_rewrites_does_not_grow_with_the_run(analyst, tenant, test_graphs):
    """Every step rewrites the run row: anything in it that grows per step (a list of the completed
    nodes did) makes each step cost more than the one before — PostgreSQL re-compressed that list on
    every UPDATE (ADR 0010, "The server's share of a step"). Measured on the row's stored size."""
    from runs import services
    from runs.executor import run_step
    from runs.models import AgentRun, RunStatus

    run = services.run_start(actor=analyst, tenant=tenant, graph="test_append", input={"n": 400},
                             budget={"max_steps": 405}, enqueue=False)

    def row_size() -> int:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                # The row as text: what an UPDATE handles before compression (a repetitive list
                # compresses to almost nothing, yet is de- and re-compressed on every step).
                cursor.execute("SELECT octet_length(r::text) FROM runs_agentrun r WHERE id = %s", [run.pk])
            else:  # the bytes of every column as stored
                columns = [f.column for f in AgentRun._meta.concrete_fields]
                cursor.execute("SELECT " + " + ".join(f"coalesce(length(CAST({c} AS BLOB)), 0)" for c in columns)
                               + " FROM runs_agentrun WHERE id = %s", [run.pk])
            return cursor.fetchone()[0]

    sizes = {}
    for step in range(1, 401):
        outcome = run_step(run_id=run.pk, worker_id="w1", enqueue=False, keep_lease=True)
        if step in (20, 399):
            sizes[step] = row_size()
        if outcome.status != RunStatus.RUNNING:
            break
    assert AgentRun.objects.get(pk=run.pk).steps_used == 400
    assert sizes[399] <= sizes[20] + 16, sizes  # a few digits more (counters), nothing per step
