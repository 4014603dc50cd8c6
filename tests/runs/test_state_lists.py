"""Append-only state fields whose stored items load only when read (runs.state_lists,
runs.state_load, ADR 0010): the lazy load equals the eager one, at any checkpoint and for forks;
it reads counts, not items; the state hashes without fetching them; an old-format compaction still
loads; a purge between the load and the read is an error, never a shorter list."""

from __future__ import annotations

import json
import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import services
from runs.executor import STATE_CACHE, run_step
from runs.models import Checkpoint, RunStatus
from runs.state import RunState, state_hash
from runs.state_lists import AppendLog, CheckpointChanged
from runs.state_load import _lazy_rows_sql, load_chain, state_at
from tests.runs.conftest import drive


def _start(analyst, tenant, n, graph="test_append"):
    return services.run_start(actor=analyst, tenant=tenant, graph=graph, input={"n": n},
                              budget={"max_steps": n + 5}, enqueue=False)


def _eager(run, sequence=None) -> RunState:
    return RunState.model_validate(load_chain(run, sequence, lazy=False)[0])


# --- the type -----------------------------------------------------------------------------------

def test_an_append_log_reads_like_a_list_and_only_grows():
    fetched = []

    def loader():
        fetched.append(1)
        return ["a", "b", "c"]

    log = AppendLog(["d"], prefix_len=3, loader=loader)
    assert len(log) == 4 and bool(log) and log[-1] == "d" and log[3] == "d" and log[3:] == ["d"]
    log.append("e")
    log.extend(["f"])
    assert log.since(3) == ["d", "e", "f"] and log[-2:] == ["e", "f"]
    assert fetched == [] and not log.loaded and log.pending_count == 3
    assert log[0] == "a" and fetched == [1] and log.loaded
    assert list(log) == ["a", "b", "c", "d", "e", "f"] == log.as_list() and log == AppendLog(log.as_list())
    assert log[1:3] == ["b", "c"] and log[::2] == ["a", "c", "e"] and fetched == [1]
    with pytest.raises(IndexError):
        log[6]
    for change in ("insert", "pop", "remove", "clear", "__setitem__", "__delitem__", "sort", "reverse"):
        assert not hasattr(log, change), change
    with pytest.raises(TypeError):
        hash(log)


def test_an_append_log_that_finds_fewer_items_than_it_counted_says_so():
    log = AppendLog([], prefix_len=3, loader=lambda: ["a"])
    assert len(log) == 3
    with pytest.raises(CheckpointChanged, match="load it again"):
        list(log)


def test_run_state_validates_serialises_and_describes_its_append_only_fields():
    state = RunState(goal="g", notes=["n"], completed_steps=[{"sequence": 1, "node": "a", "outcome": "goto"}])
    assert isinstance(state.notes, AppendLog) and state.completed_steps[0].node == "a"
    assert state.as_dict()["notes"] == ["n"]
    assert state.as_dict()["completed_steps"] == [{"sequence": 1, "node": "a", "outcome": "goto"}]
    assert state.hash() == state_hash(state.as_dict())
    assert RunState.model_validate_json(state.model_dump_json()) == state
    schema = RunState.model_json_schema()
    assert schema["properties"]["notes"]["type"] == "array"
    with pytest.raises(ValueError):
        RunState(goal="g", notes="not a list")
    with pytest.raises(ValueError):
        RunState(goal="g", completed_steps=[{"sequence": "x"}])


# --- loading ------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_lazy_load_equals_the_eager_one_at_random_checkpoints_and_for_forks(analyst, tenant, test_graphs,
                                                                                settings):
    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 1500
    rng = random.Random(11)
    n = rng.randint(40, 60)
    parent = drive(_start(analyst, tenant, n=n), max_steps=n + 1)
    assert parent.status == RunStatus.COMPLETED
    assert Checkpoint.objects.filter(run=parent, compacted_items__isnull=False).count() >= 5
    for sequence in sorted(rng.sample(range(0, n + 1), 10)) + [n]:
        lazy, loaded = state_at(parent, sequence)
        eager = _eager(parent, sequence)
        assert loaded == sequence
        assert lazy.hash() == eager.hash() == Checkpoint.objects.get(run=parent, sequence=sequence).state_hash
        assert lazy.as_dict() == eager.as_dict()
    for from_sequence in rng.sample(range(1, n), 3):
        fork = drive(services.run_fork(actor=analyst, run=parent, from_sequence=from_sequence, enqueue=False),
                     max_steps=n + 1)
        assert state_at(fork)[0].as_dict() == _eager(fork).as_dict() == state_at(parent)[0].as_dict()


@pytest.mark.django_db
def test_state_at_reads_counts_not_items_and_hashes_without_fetching_them(analyst, tenant, test_graphs, settings):
    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 1500
    run = drive(_start(analyst, tenant, n=60), max_steps=61)
    with CaptureQueriesContext(connection) as queries:
        state, _ = state_at(run)
        assert len(state.notes) == 60 == len(state.completed_steps)
        assert state.hash() == run.state_hash
    assert len(queries) == 1
    assert not state.notes.loaded and not state.completed_steps.loaded
    with connection.cursor() as cursor:  # what that query returned: no compaction brought a note back
        cursor.execute(_lazy_rows_sql(connection.vendor), {"run": run.pk, "upto": 2**31 - 1})
        compactions = [row[4] for row in cursor.fetchall() if row[4] is not None]
    assert len(compactions) >= 5 and not any("x" * 20 in str(compacted) for compacted in compactions)
    with CaptureQueriesContext(connection) as queries:
        notes = state.notes.as_list()
    assert len(queries) == 1 and notes == _eager(run).notes.as_list()
    assert state.completed_steps[-1].sequence == 60
    # The compactions keep the items out of the column the load reads.
    for row in Checkpoint.objects.filter(run=run, compacted__isnull=False):
        assert "notes" not in row.compacted.get("append", {})
        assert row.compacted["stored"]["notes"] == len(row.compacted_items["notes"])


@pytest.mark.django_db
def test_a_worker_resuming_a_run_from_the_database_continues_it_exactly(analyst, tenant, test_graphs, settings):
    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 1500
    run = _start(analyst, tenant, n=50)
    for _ in range(30):
        run_step(run_id=run.pk, worker_id="w1", enqueue=False, keep_lease=False)
    STATE_CACHE.clear()  # another worker, or this one restarted: the state comes from the checkpoints
    run = drive(run, max_steps=30)
    assert run.status == RunStatus.COMPLETED
    final = _eager(run)
    assert final.hash() == run.state_hash and [note[:6] for note in final.notes] == [f"{i:06d}" for i in range(1, 51)]
    assert [step.sequence for step in final.completed_steps] == list(range(1, 51))


@pytest.mark.django_db
def test_a_compaction_in_the_format_before_compacted_items_still_loads_lazily(analyst, tenant, test_graphs,
                                                                              settings):
    """Compactions written before `compacted_items` held the appended items inline and recorded no
    counts or digests: the load counts them in SQL and fetches them from there; hashing fetches."""
    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 1500
    run = drive(_start(analyst, tenant, n=40), max_steps=41)
    expected = _eager(run)
    for row in Checkpoint.objects.filter(run=run, compacted__isnull=False):
        compacted = dict(row.compacted)
        compacted.pop("chains"), compacted.pop("stored")
        compacted.setdefault("append", {}).update(row.compacted_items)
        Checkpoint.objects.filter(pk=row.pk).update(compacted=compacted, compacted_items=None)
    state, _ = state_at(run)
    assert len(state.notes) == 40 and not state.notes.loaded
    assert state.hash() == expected.hash() == run.state_hash
    assert state.as_dict() == expected.as_dict()


@pytest.mark.django_db
def test_items_purged_after_the_load_are_an_error_when_read_never_a_shorter_list(analyst, tenant, test_graphs,
                                                                                 settings):
    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 1500
    run = drive(_start(analyst, tenant, n=40), max_steps=41)
    state, _ = state_at(run)
    assert len(state.notes) == 40
    first = Checkpoint.objects.filter(run=run, compacted_items__isnull=False).order_by("sequence").first()
    Checkpoint.objects.filter(pk=first.pk).update(compacted_items={"notes": json.loads('["only one"]')})
    with pytest.raises(CheckpointChanged, match="load it again"):
        state.notes.as_list()


@pytest.mark.django_db
def test_a_page_that_shows_the_whole_state_reads_it_in_one_query_with_nothing_left_to_fetch(
        analyst, tenant, test_graphs, settings):
    """The run inspector prints every note: it reads them with the state (selectors.run_state_at
    whole=True), so no later fetch exists that a purge in between could break."""
    from runs.selectors import run_state_at

    settings.ARBITER_CHECKPOINT_COMPACT_BYTES = 1500
    run = drive(_start(analyst, tenant, n=40), max_steps=41)
    with CaptureQueriesContext(connection) as queries:
        state = run_state_at(run=run, sequence=40, whole=True)
        shown = state.as_dict()
    assert len(queries) == 1 and state.notes.loaded and state.completed_steps.loaded
    assert shown == _eager(run, 40).as_dict() and len(shown["notes"]) == 40
    Checkpoint.objects.filter(run=run, compacted_items__isnull=False).update(compacted_items=None)
    assert state.as_dict() == shown  # nothing is fetched after the read
