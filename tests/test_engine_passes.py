"""Which tests each pass runs (tests/conftest.py): on PostgreSQL the first phase leaves out the
tests that use no database — pytest-django refuses them any query, so no engine can change them —
and keeps every test that uses one, whichever way it asks; slow tests are left to their marks."""

from types import SimpleNamespace

import pytest
from django.test import SimpleTestCase, TestCase

from tests import conftest


def _item(name, *, fixtures=(), marker=None, cls=None, slow=False):
    keywords = {"slow": True} if slow else {}
    return SimpleNamespace(nodeid=name, fixturenames=list(fixtures), cls=cls, keywords=keywords,
                           get_closest_marker=lambda wanted: object() if wanted == marker else None)


@pytest.mark.parametrize("item", [
    _item("marked", marker="django_db"),
    _item("db fixture", fixtures=["tenant", "db"]),
    _item("transactional", fixtures=["transactional_db"]),
    _item("live server", fixtures=["live_server"]),
    _item("django test case", cls=TestCase),
], ids=lambda item: item.nodeid)
def test_a_test_that_uses_the_database_is_kept(item):
    assert conftest._uses_the_database(item)


def test_the_postgresql_pass_deselects_only_fast_tests_that_use_no_database():
    kept = [_item("uses db", fixtures=["db"]), _item("slow, no db fixture", slow=True)]
    dropped = [_item("pure", fixtures=["settings", "tmp_path", "django_db_blocker"]),
               _item("simple test case", cls=SimpleTestCase)]
    items, reported = [*kept, *dropped], []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: reported.extend(items)))
    conftest._deselect_what_no_engine_can_change(config, items)
    assert items == kept and reported == dropped
