"""Which tests each pass skips (tests/conftest.py): on SQLite the PostgreSQL-only ones; on
PostgreSQL the engine-independent ones and those that neither use the database nor are slow."""

from types import SimpleNamespace

import pytest

from tests import conftest


class FakeItem:
    def __init__(self, name, *, marks=(), fixtures=()):
        self.name = name
        self.keywords = {name: True, **{mark: True for mark in marks}}
        self.marks = set(marks)
        self.fixturenames = list(fixtures)
        self.added = []

    def get_closest_marker(self, name):
        return SimpleNamespace(name=name) if name in self.marks else None

    def add_marker(self, marker):
        self.added.append(marker.kwargs["reason"])


def _items():
    return [FakeItem("pure"), FakeItem("marked_db", marks=["django_db"]), FakeItem("db_fixture", fixtures=["db"]),
            FakeItem("persona", fixtures=["analyst", "db"]), FakeItem("live", fixtures=["live_server"]),
            FakeItem("slow_process", marks=["slow"]), FakeItem("pg_only", marks=["postgres"]),
            FakeItem("independent", marks=["slow", "engine_independent"])]


def _skipped(monkeypatch, database_url):
    monkeypatch.setenv("DATABASE_URL", database_url)
    items = _items()
    conftest.pytest_collection_modifyitems(SimpleNamespace(), items)
    return {item.name: item.added[0] for item in items if item.added}


@pytest.mark.parametrize("url", ["postgres://postgres@127.0.0.1/x", "postgresql://postgres@127.0.0.1/x"])
def test_the_postgresql_pass_skips_what_cannot_depend_on_the_engine(monkeypatch, url):
    skipped = _skipped(monkeypatch, url)
    assert set(skipped) == {"pure", "independent"}
    assert "uses no database" in skipped["pure"] and "SQLite database of their own" in skipped["independent"]


def test_the_sqlite_pass_skips_only_the_postgresql_tests(monkeypatch):
    skipped = _skipped(monkeypatch, "")
    assert set(skipped) == {"pg_only"} and "needs PostgreSQL" in skipped["pg_only"]
