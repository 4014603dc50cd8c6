"""The case lifecycle is declared once (cases.models): the lists derived from it agree with the enum,
and the index migration's frozen copy of the status rank is the model's."""

import importlib

from cases.models import (
    OPEN_STATUSES,
    SETTLED_STATUSES,
    STATUS_RANK,
    TERMINAL_STATUSES,
    CaseStatus,
    is_settled,
)


def test_every_status_is_either_open_or_settled_and_closed_is_terminal():
    assert OPEN_STATUSES | SETTLED_STATUSES == set(CaseStatus)
    assert not OPEN_STATUSES & SETTLED_STATUSES
    assert SETTLED_STATUSES == {CaseStatus.DECIDED, CaseStatus.CLOSED}
    assert TERMINAL_STATUSES <= SETTLED_STATUSES
    assert is_settled("decided") and is_settled(CaseStatus.CLOSED) and not is_settled("under_review")


def test_the_status_rank_follows_the_order_of_declaration():
    assert list(STATUS_RANK) == [status.value for status in CaseStatus]
    assert sorted(STATUS_RANK.values()) == list(range(len(CaseStatus)))


def test_the_queue_index_migration_ranks_statuses_as_the_model_does():
    # A migration must not change under a later edit, so it keeps its own copy; an index only serves
    # a query whose expression compiles to the same SQL, so the copy must equal the model's rank.
    migration = importlib.import_module("web.migrations.0002_queue_indexes_postgres")
    assert migration.STATUS_RANK == STATUS_RANK, (
        "cases.models.STATUS_RANK changed: add a migration that rebuilds web_case_status_key with the new rank")
