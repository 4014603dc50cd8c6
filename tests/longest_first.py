"""The slow phase starts its longest tests first; the first phase starts its browser tests first.

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
    items.sort(key=lambda item: -seconds.get(item.nodeid, math.inf))  # stable: ties keep pytest's order


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
