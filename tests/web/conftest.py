"""Browser-test support: the live server is quiet before the database is flushed.

Root cause of the flaky "database table is locked" at teardown: on SQLite the live
server thread shares the test's in-memory database connection (pytest-django's
connections_override). A page keeps talking to the server after the last assertion — a swap
brings `hx-trigger="load"` sections (agents, threads) that fetch themselves, polls run every 2s —
and closing the browser context does not stop a request the server thread is already serving.
The `transactional_db` flush then ran on the same connection while that thread was inside a
query. `quiet_live_server` counts the live server's connections (from accept to the end of
their thread) and, after the pages are closed, waits for the count to reach zero, so the flush
starts only when no request can still touch the database.

A second race of the same shared connection: the live server is threaded, so two requests of one
page (a swap and the notifications poll, every 15 s) could run at once on that one connection and
interleave their transactions (seen as `IndexError: pop from empty list` in an atomic block, then
"database table is locked" at the flush). On an in-memory SQLite database `SerializedRequests`
lets one request at a time reach the application, from its call to the end of its response body
(a streamed export included) — per request, not per connection, so a browser's keep-alive
connection never holds the others up. PostgreSQL gives each server thread its own connection and
is left concurrent."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest

IDLE_TIMEOUT_SECONDS = 15


class InFlightConnections:
    """Connections the live server accepted and has not finished serving."""

    def __init__(self) -> None:
        self.count = 0
        self.condition = threading.Condition()

    def _done(self) -> None:
        with self.condition:
            self.count -= 1
            self.condition.notify_all()

    @classmethod
    def install(cls, httpd) -> InFlightConnections:
        """Wrap the server's request dispatch once (the live server lives for the whole session).
        ThreadingMixIn.process_request starts a thread on self.process_request_thread, looked up
        on the instance, so both wrappers take effect for the next connection."""
        tracker = getattr(httpd, "_in_flight_connections", None)
        if tracker is not None:
            return tracker
        tracker = cls()
        accept, serve = httpd.process_request, httpd.process_request_thread

        def process_request(request, client_address):
            with tracker.condition:
                tracker.count += 1  # counted at accept: no gap before its thread starts
            try:
                accept(request, client_address)
            except BaseException:
                tracker._done()
                raise

        def process_request_thread(request, client_address):
            try:
                serve(request, client_address)
            finally:
                tracker._done()

        httpd.process_request = process_request
        httpd.process_request_thread = process_request_thread
        httpd._in_flight_connections = tracker
        return tracker

    def wait_idle(self, timeout: float) -> bool:
        with self.condition:
            return self.condition.wait_for(lambda: self.count <= 0, timeout=timeout)


class SerializedRequests:
    """Wrap the live server's WSGI application so requests reach it one at a time."""

    def __init__(self, application) -> None:
        self.application = application
        self.lock = threading.Lock()

    @classmethod
    def install(cls, httpd) -> SerializedRequests:
        wrapper = getattr(httpd, "_serialized_requests", None)
        if wrapper is None:
            wrapper = cls(httpd.get_app())
            httpd.set_app(wrapper)
            httpd._serialized_requests = wrapper
        return wrapper

    def __call__(self, environ, start_response):
        self.lock.acquire()
        try:
            result = self.application(environ, start_response)
        except BaseException:
            self.lock.release()
            raise
        return _ReleasingBody(result, self.lock)


class _ReleasingBody:
    """The response body; the lock is released when the server closes it (wsgiref closes the
    body on every path, a client's disconnect included)."""

    def __init__(self, result, lock) -> None:
        self.result, self.lock, self.released = result, lock, False

    def __iter__(self):
        return iter(self.result)

    def close(self) -> None:
        try:
            if hasattr(self.result, "close"):
                self.result.close()
        finally:
            if not self.released:
                self.released = True
                self.lock.release()


def send_at_once(httpd) -> None:
    """Nagle's algorithm off on each connection the live server accepts, as `manage.py runserver`
    has it (core/management/commands/runserver.py): Django's server writes a response's headers and
    body apart, and on a browser's kept-alive connection the body otherwise waits for the delayed
    acknowledgement of the headers, about 40 ms a request."""
    if getattr(httpd, "_sends_at_once", False):
        return
    accept = httpd.get_request

    def get_request():
        connection, address = accept()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address

    httpd.get_request = get_request
    httpd._sends_at_once = True


def _shares_in_memory_sqlite() -> bool:
    from django.db import connections

    return any(conn.vendor == "sqlite" and conn.is_in_memory_db() for conn in connections.all())


@pytest.fixture
def quiet_live_server(live_server):
    """The live server; at teardown (after the pages using it are closed, since those fixtures
    depend on this one) wait until it serves no connection, before the database is flushed."""
    send_at_once(live_server.thread.httpd)
    tracker = InFlightConnections.install(live_server.thread.httpd)
    if _shares_in_memory_sqlite():
        SerializedRequests.install(live_server.thread.httpd)
    yield live_server
    if not tracker.wait_idle(IDLE_TIMEOUT_SECONDS):
        pytest.fail(f"the live server still served {tracker.count} connection(s) {IDLE_TIMEOUT_SECONDS}s after "
                    "the pages were closed; the database flush would race them")


@pytest.fixture
def db_turn(quiet_live_server):
    """`with db_turn(): ...` around the test's own writes while a page may be polling the server
    (a worker's part run by the test, a colleague's edit): on in-memory SQLite the test thread then
    holds the server's request lock, so no request interleaves its transaction with the test's.
    Never drive the page inside it (the page's requests would wait for the lock)."""
    wrapper = getattr(quiet_live_server.thread.httpd, "_serialized_requests", None)

    @contextlib.contextmanager
    def turn():
        if wrapper is None:
            yield
            return
        with wrapper.lock:
            yield

    return turn


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through Playwright, one per test module (tests/web/browser.py)."""
    from playwright.sync_api import sync_playwright

    from tests.web.browser import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser, quiet_live_server):
    """A page factory on the live server; no request outlives the test (quiet_live_server)."""
    contexts = []

    def make(*, width: int = 1360, height: int = 900, javascript: bool = True):
        context = browser.new_context(viewport={"width": width, "height": height}, java_script_enabled=javascript,
                                      base_url=quiet_live_server.url)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        return page

    yield make
    for context in contexts:
        context.close()
