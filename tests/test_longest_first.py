"""The slow phase's order (tests/longest_first.py): longest first by the times kept in pytest's
cache, never-timed tests first of all, any run with a test not marked slow left as it is; the times
of a run are added up per test and merged into the cache, a skipped test keeping its last time."""

from types import SimpleNamespace

import pytest

from tests import longest_first


class Cache(dict):
    def get(self, key, default):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value


def _item(nodeid, *, slow=True, group=None):
    marks = {"slow": SimpleNamespace(args=(), kwargs={})} if slow else {}
    if group is not None:
        marks["xdist_group"] = SimpleNamespace(args=(group,), kwargs={})
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=marks.get)


def _order(items, cache):
    longest_first.pytest_collection_modifyitems(SimpleNamespace(cache=cache), items)
    return [item.nodeid for item in items]


def test_a_slow_run_starts_with_the_tests_never_timed_then_the_longest():
    cache = Cache({longest_first.CACHE_KEY: {"a": 3.0, "b": 60.0, "d": 20.0}})
    items = [_item("a"), _item("b"), _item("c"), _item("d"), _item("e")]
    assert _order(items, cache) == ["c", "e", "b", "d", "a"]


def test_the_tests_of_one_xdist_group_stay_in_pytests_order_at_their_longest_member_s_place():
    # "g2" reuses what "g1" left (tests/ops/test_run_local.py): it must not be started before it, even
    # when it took longer last time; the group goes where its longest test would.
    cache = Cache({longest_first.CACHE_KEY: {"a": 3.0, "b": 60.0, "g1": 10.0, "g2": 40.0, "d": 20.0}})
    items = [_item("a"), _item("g1", group="g"), _item("b"), _item("g2", group="g"), _item("d")]
    assert _order(items, cache) == ["b", "g1", "g2", "d", "a"]


def test_a_group_xdist_did_not_tag_is_named():
    items = [_item("t.py::a@g", group="g"), _item("t.py::b[x@y]", group="g"), _item("t.py::c[x@y]@g", group="g"),
             _item("t.py::d"), _item("t.py::e[p@q]")]
    assert longest_first.ungrouped(items) == ["t.py::b[x@y]"]


def test_a_run_with_a_test_not_marked_slow_keeps_pytests_order():
    cache = Cache({longest_first.CACHE_KEY: {"a": 3.0, "b": 60.0}})
    items = [_item("a"), _item("b"), _item("x", slow=False)]
    assert _order(items, cache) == ["a", "b", "x"]


def test_without_the_cache_nothing_is_reordered():
    items = [_item("a"), _item("b")]
    longest_first.pytest_collection_modifyitems(SimpleNamespace(), items)
    assert [item.nodeid for item in items] == ["a", "b"]


def _report(nodeid, when, duration, *, skipped=False, slow=True):
    return SimpleNamespace(nodeid=nodeid, when=when, duration=duration, skipped=skipped,
                           keywords={"slow": 1} if slow else {})


def test_times_are_added_up_per_test_and_merged_into_the_cache_a_skipped_test_keeping_its_last():
    cache = Cache({longest_first.CACHE_KEY: {"kept": 40.0, "skipped": 30.0, "again": 9.0}})
    times = longest_first.SlowTimes(cache)
    for report in (_report("again", "setup", 1.0), _report("again", "call", 4.0), _report("again", "teardown", 0.5),
                   _report("skipped", "setup", 0.01, skipped=True), _report("skipped", "teardown", 0.0),
                   _report("fast", "call", 0.2, slow=False), _report("new", "call", 2.0)):
        times.pytest_runtest_logreport(report)
    times.pytest_sessionfinish(session=None)
    assert cache[longest_first.CACHE_KEY] == {"kept": 40.0, "skipped": 30.0, "again": 5.5, "new": 2.0}


@pytest.mark.parametrize("worker", [True, False])
def test_only_the_process_that_reports_results_keeps_the_times(worker):
    registered = []
    config = SimpleNamespace(cache=Cache(), pluginmanager=SimpleNamespace(register=lambda *a: registered.append(a)))
    if worker:
        config.workerinput = {"workerid": "gw0"}
    longest_first.pytest_configure(config)
    assert len(registered) == (0 if worker else 1)
