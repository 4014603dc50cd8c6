"""Regression: two requests of one page (a swap and the 15 s notifications poll) reached the
threaded live server at once and interleaved their transactions on the one in-memory SQLite
connection it shares with the test (`IndexError: pop from empty list` in an atomic block, then
"database table is locked" at the flush, about 2 runs in 6). tests/web/conftest.py's
SerializedRequests lets one request at a time into the application, body included."""

import threading
import time

from tests.web.conftest import SerializedRequests


class _Server:
    """The two methods of wsgiref's WSGIServer that SerializedRequests uses."""

    def __init__(self, app):
        self.app = app

    def get_app(self):
        return self.app

    def set_app(self, app):
        self.app = app


def _serve(app):
    """What wsgiref's handler does with an application: call it, iterate the body, close it."""
    body = app({}, lambda status, headers: None)
    try:
        return b"".join(body)
    finally:
        body.close()


def test_requests_reach_the_application_one_at_a_time_until_their_body_is_closed():
    active, peak, guard = [0], [0], threading.Lock()

    def app(environ, start_response):
        def body():
            with guard:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.02)  # a streamed body still querying
            yield b"x"
            with guard:
                active[0] -= 1

        return body()

    server = _Server(app)
    wrapper = SerializedRequests.install(server)
    assert SerializedRequests.install(server) is wrapper  # installed once per server
    threads = [threading.Thread(target=_serve, args=(server.get_app(),)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak[0] == 1
    assert wrapper.lock.acquire(blocking=False)  # released after the last body was closed


def test_the_lock_is_released_when_the_application_raises_or_the_body_is_closed_twice():
    def failing(environ, start_response):
        raise RuntimeError("boom")

    wrapper = SerializedRequests(failing)
    for _ in range(2):
        try:
            wrapper({}, lambda *a: None)
        except RuntimeError:
            pass
        else:  # pragma: no cover
            raise AssertionError("the application's error must propagate")
    assert wrapper.lock.acquire(blocking=False)
    wrapper.lock.release()

    ok = SerializedRequests(lambda environ, start_response: [b"ok"])
    body = ok({}, lambda *a: None)
    body.close()
    body.close()  # wsgiref may close twice on an error path: released once, not twice
    assert ok.lock.acquire(blocking=False)
