"""A real local HTTP receiver for webhook tests (http.server in a thread), and a webhook endpoint.
The `receiver` fixture allows loopback through ARBITER_WEBHOOK_ALLOWED_NETWORKS (webhooks reach
public addresses only by default); `Receiver()` alone allows nothing (the refusal tests use it)."""

from __future__ import annotations

import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Receiver:
    """Records every request; answers with the next status of `statuses` (then 200), the body
    `reply` when set, a Location header when `location` is set, after `delay` seconds."""

    def __init__(self):
        self.requests: queue.Queue = queue.Queue()
        self.statuses: list[int] = []
        self.reply: bytes | None = None
        self.location: str | None = None
        self.delay = 0.0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                receiver.requests.put({"headers": dict(self.headers), "body": body, "status": status})
                time.sleep(receiver.delay)
                self.send_response(status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.end_headers()
                self.wfile.write(receiver.reply or (b"ok" if status < 300 else b"receiver failed"))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def next(self, timeout: float = 10) -> dict:
        return self.requests.get(timeout=timeout)

    def received(self) -> list[dict]:
        items = []
        while not self.requests.empty():
            items.append(self.requests.get_nowait())
        return items

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def local_receivers_allowed(settings):
    """Webhooks reach public addresses only; a receiver on 127.0.0.1 is reachable because the
    operator setting allows loopback, as an operator would allow an on-premises network."""
    settings.ARBITER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def receiver(local_receivers_allowed):
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture(autouse=True)
def _webhook_settings(settings):
    settings.ARBITER_WEBHOOK_ALLOW_HTTP = True
    settings.ARBITER_WEBHOOK_TIMEOUT_SECONDS = 5


@pytest.fixture
def kicked(monkeypatch):
    """Deliveries handed to Celery after commit, captured (ids) instead of sent to a broker."""
    calls = []
    monkeypatch.setattr("integrations.tasks.webhook_deliver_task.delay", lambda delivery_id: calls.append(delivery_id))
    return calls


@pytest.fixture
def endpoint(supervisor, receiver):
    from integrations.webhooks import webhook_endpoint_create

    endpoint, secret = webhook_endpoint_create(actor=supervisor, url=receiver.url,
                                               event_types=["case.changed", "proposal.created", "run.finished",
                                                            "proposal.decided", "notice.approved", "notice.sent"])
    endpoint.plain_secret = secret
    return endpoint


from tests.api.conftest import _fresh_throttles, api, bearer, make_key  # noqa: E402, F401  (shared fixtures)
