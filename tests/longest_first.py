"""The slow phase starts its longest tests first; the first phase starts its browser tests first;
the tests of one xdist_group are kept together and checked to be grouped.

`make test`'s second phase is a few dozen tests on two xdist workers, from a few seconds to a few
minutes each. `--dist loadgroup` hands them out in collection order and keeps two or three queued on
each worker, so a long test met late can leave one worker running it alone while the other is idle.
Started longest first, the tail is made of short tests instead.

How long each slow test took is kept in pytest's cache (`.pytest_cache`, key `arbiter/slow-seconds`)
by the process that reports the results (xdist's controller, or pytest itself without -n). A test
skipped (a PostgreSQL-only test on SQLite, an engine-independent one on PostgreSQL) keeps the time of
its last run. A test never timed yet goes first: it may be long. Only a run made entirely of slow
tests is reordered so. Every worker reads the same cache before
the run, so they agree on the order, as xdist requires.

The first phase (every test not marked slow) is CPU-bound but for its browser tests, which spend
most of their time waiting on a page (a poll every 2 s, an axe scan, Chromium starting). Left in
collection order they came last (tests/web/) and ran alone for the last minute at half the machine's
CPU; started first, beside twice as many xdist workers as cores (the Makefile's FAST_TEST_WORKERS),
their waits overlap the CPU-bound tests: the phase took 247 s on SQLite with 2 workers in
collection order, 210 s with 4, 183 s with 4 and the browser tests first (idle 2-core machine)."""

from __future__ import annotations

import math

import pytest

CACHE_KEY = "arbiter/slow-seconds"


def _cache(config):
    return getattr(config, "cache", None)  # None under -p no:cacheprovider: nothing is reordered or kept


@pytest.hookimpl(trylast=True)  # after -m has deselected: what is left is what runs
def pytest_collection_modifyitems(config, items):
    if not items:
        return
    if not all(item.get_closest_marker("slow") for item in items):
        items.sort(key=lambda item: "browser" not in getattr(item, "fixturenames", ()))  # stable
        return
    cache = _cache(config)
    if cache is None:
        return
    seconds = cache.get(CACHE_KEY, {})
    # The tests of one xdist_group run on one worker in this order (--dist loadgroup), and may rely on
    # it (a test that reuses what the one before it left): each is sorted by its group's longest time.
    groups: dict[str, float] = {}
    for item in items:
        if (group := _group(item)) is not None:
            groups[group] = max(groups.get(group, -math.inf), seconds.get(item.nodeid, math.inf))

    def longest(item) -> float:
        group = _group(item)
        return groups[group] if group is not None else seconds.get(item.nodeid, math.inf)

    items.sort(key=lambda item: -longest(item))  # stable: ties keep pytest's order


def _group(item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return mark.args[0] if mark.args else mark.kwargs.get("name")


def ungrouped(items) -> list[str]:
    """The tests carrying an xdist_group mark that xdist did not group: under --dist loadgroup it
    tags each one's node id with "@<group>" on the worker, and schedules by that tag. pytest 9.2's
    node ids dropped the tag silently (pytest-dev/pytest-xdist#1386): the groups were spread over
    the workers, and a test relying on its group ran beside, or before, the one it needs."""
    return [item.nodeid for item in items
            if _group(item) is not None and item.nodeid.rfind("@") <= item.nodeid.rfind("]")]  # xdist's own test


_UNGROUPED = pytest.StashKey[set]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """On an xdist worker under --dist loadgroup, note the tests xdist failed to group."""
    if getattr(session.config.option, "loadgroup", False):
        session.config.stash[_UNGROUPED] = set(ungrouped(session.items))


def pytest_runtest_setup(item):
    """Each of them fails, saying why, instead of running where it may meet what its group keeps apart."""
    if item.nodeid in item.config.stash.get(_UNGROUPED, set()):
        pytest.fail("pytest-xdist's --dist loadgroup did not group this test (no '@<group>' on its node id): "
                    "check the pytest version pinned in pyproject.toml (pytest-dev/pytest-xdist#1386)",
                    pytrace=False)


class SlowTimes:
    """Adds up each slow test's setup, call and teardown, and keeps the totals when the run ends."""

    def __init__(self, cache):
        self.cache = cache
        self.seconds: dict[str, float] = {}
        self.skipped: set[str] = set()

    def pytest_runtest_logreport(self, report):
        if "slow" not in report.keywords:
            return
        if report.skipped:
            self.skipped.add(report.nodeid)  # not run: its last real time is kept
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session):
        measured = {nodeid: round(total, 1) for nodeid, total in self.seconds.items() if nodeid not in self.skipped}
        if measured:
            self.cache.set(CACHE_KEY, self.cache.get(CACHE_KEY, {}) | measured)


def pytest_configure(config):
    cache = _cache(config)
    if cache is not None and not hasattr(config, "workerinput"):  # an xdist worker: its controller keeps them
        config.pluginmanager.register(SlowTimes(cache), "arbiter-slow-times")
