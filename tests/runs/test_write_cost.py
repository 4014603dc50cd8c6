"""What a step makes the database write besides its rows (issue 10, ADR 0010 "Write cost per
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


@pytest.mark.django_db
@pytest.mark.parametrize("table", STEP_TABLES)
def test_no_index_a_step_writes_is_the_leading_part_of_another(table):
    indexes = _indexes(table)
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
        run_sequence = [info for info in _indexes(table).values() if info["columns"] == ["run_id", "sequence"]]
        assert len(run_sequence) == 1 and run_sequence[0]["unique"]


@pytest.mark.django_db
def test_the_run_table_leaves_room_on_each_page_for_the_steps_update():
    if connection.vendor != "postgresql":
        pytest.skip("fillfactor is a PostgreSQL storage parameter")
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'runs_agentrun'")
        assert "fillfactor=70" in (cursor.fetchone()[0] or [])
