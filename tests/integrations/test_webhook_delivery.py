"""Webhooks through a receiver outage, with a REAL local HTTP receiver on a port of its own that
fails (500) and then goes away (the port refuses connections) while events keep happening. Time is
compressed by settings: one hour of outage lasts 3 seconds (1 s stands for 20 minutes), so the
24-hour disable window is 72 s and a 30 s backoff is 25 ms.

- An outage of an hour, shorter than the window: every event arrives at least once, exactly the
  set of events (deduplicated by event id on the receiver), no delivery given up, the endpoint
  never disabled.
- A streak longer than the window: the endpoint is disabled by the first failure after it, events
  keep being queued (and not sent), and enabling it again delivers all of them, oldest first."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from integrations.catalogue import types_matching
from integrations.events import feed_assign
from integrations.models import (
    DeliveryStatus,
    IntegrationEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from integrations.webhook_delivery import webhook_deliver_due
from integrations.webhooks import webhook_endpoint_create, webhook_endpoint_update
from tests.factories import make_case

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

HOUR = 3.0  # seconds standing for one hour
SCALE = 3600 / HOUR


def _free_port() -> int:
    """A port the kernel has free now (never a fixed range two test processes share)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OutageReceiver:
    """A receiver on one port of its own (kept across a stop and start) that can be up (200),
    failing (500) or down (stopped: the port refuses connections). It deduplicates by event id, as a receiver must."""

    def __init__(self):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.failing = False
        self.lock = threading.Lock()
        self.acknowledged: list[str] = []  # event ids answered 2xx, in arrival order (duplicates kept)
        self.failed = 0
        self.server: ThreadingHTTPServer | None = None
        self.start()

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    if receiver.failing:
                        receiver.failed += 1
                        status = 500
                    else:
                        receiver.acknowledged.append(json.loads(body)["id"])
                        status = 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.server = None

    def unique(self) -> set[str]:
        with self.lock:
            return set(self.acknowledged)


@pytest.fixture
def outage_receiver(local_receivers_allowed):
    receiver = OutageReceiver()
    yield receiver
    if receiver.server is not None:
        receiver.stop()


@pytest.fixture
def compressed(settings):
    settings.ARBITER_WEBHOOK_BACKOFF_SECONDS = 30 / SCALE
    settings.ARBITER_WEBHOOK_BACKOFF_MAX_SECONDS = 3600 / SCALE
    settings.ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS = 24 * 3600 / SCALE
    settings.ARBITER_WEBHOOK_MAX_ATTEMPTS = 3  # fewer than an hour's outage takes: the outage must not count
    settings.ARBITER_WEBHOOK_TIMEOUT_SECONDS = 2
    return settings


class World:
    """Events keep happening (a case opened every `every` seconds) while the beat poll runs."""

    def __init__(self, analyst, endpoint):
        self.analyst, self.endpoint = analyst, endpoint
        self.opened = 0
        self.ever_disabled_at: float | None = None
        self.started = time.monotonic()

    def run(self, seconds: float, *, every: float | None = 0.25) -> None:
        """`seconds` of beat polls with a case opened every `every` seconds; on a loaded machine
        (a loop turn slower than `every`) it goes on until as many cases were opened as planned,
        so the count of events does not depend on the machine's speed."""
        end, next_event = time.monotonic() + seconds, time.monotonic()
        planned = 0 if every is None else int(seconds / every)
        opened_before = self.opened
        while time.monotonic() < end or self.opened - opened_before < planned:
            if every is not None and time.monotonic() >= next_event:
                self.opened += 1
                make_case(actor=self.analyst, title=f"case {self.opened}")
                next_event += every
            webhook_deliver_due()
            if self.ever_disabled_at is None and not WebhookEndpoint.objects.get(pk=self.endpoint.pk).is_active:
                self.ever_disabled_at = time.monotonic() - self.started
            time.sleep(0.01)

    def drain(self, receiver: OutageReceiver, *, timeout: float = 20) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and receiver.unique() != self.expected():
            self.run(0.1, every=None)

    def expected(self) -> set[str]:
        feed_assign()
        return {f"evt_{pk}" for pk in IntegrationEvent.objects.filter(type__in=[kind for subscribed in self.endpoint.event_types
                                                                for kind in types_matching(subscribed)])
                .values_list("pk", flat=True)}


def test_a_receiver_outage_of_an_hour_loses_no_event(analyst, supervisor, outage_receiver, compressed):
    receiver = outage_receiver
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["case.changed"])
    world = World(analyst, endpoint)
    world.run(0.5)
    assert receiver.unique() == world.expected() and receiver.failed == 0
    receiver.failing = True  # the first half hour: the receiver answers 500
    world.run(HOUR / 2)
    receiver.stop()  # the second half hour: nothing listens on the port
    world.run(HOUR / 2)
    receiver.failing = False
    receiver.start()  # back after an hour
    world.run(0.5)
    world.drain(receiver)

    assert receiver.unique() == world.expected()  # every event, at least once, and nothing else
    assert len(world.expected()) >= world.opened >= 10
    assert receiver.failed > 0 and WebhookAttempt.objects.filter(error_category="connect").exists()
    assert WebhookAttempt.objects.filter(succeeded=False).values("delivery").distinct().count() > 1
    assert world.ever_disabled_at is None  # never disabled before its window
    assert not WebhookDelivery.objects.filter(status=DeliveryStatus.FAILED).exists()  # none given up
    endpoint.refresh_from_db()
    assert endpoint.is_active and endpoint.failing_since is None and endpoint.consecutive_failures == 0


def test_a_streak_longer_than_the_window_disables_keeps_queueing_and_enabling_delivers_all(
        analyst, supervisor, outage_receiver, compressed):
    compressed.ARBITER_WEBHOOK_DISABLE_AFTER_SECONDS = HOUR  # a window of "one hour", exceeded below
    receiver = outage_receiver
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url=receiver.url, event_types=["case.changed"])
    world = World(analyst, endpoint)
    world.run(0.3)
    receiver.failing = True
    failing_from = time.monotonic() - world.started
    world.run(HOUR * 1.5)
    endpoint.refresh_from_db()
    assert endpoint.is_active is False and "failed continuously" in endpoint.disabled_reason
    assert world.ever_disabled_at is not None and world.ever_disabled_at - failing_from >= HOUR
    failed_while_disabled = receiver.failed
    receiver.failing = False  # the receiver is back, but the endpoint stays disabled until a person acts
    arrived_before = len(receiver.acknowledged)
    world.run(0.5)
    assert len(receiver.acknowledged) == arrived_before and receiver.failed == failed_while_disabled
    waiting = WebhookDelivery.objects.filter(endpoint=endpoint, status=DeliveryStatus.PENDING)
    assert waiting.count() > 1 and not WebhookDelivery.objects.filter(status=DeliveryStatus.FAILED).exists()
    queued_order = [f"evt_{pk}" for pk in waiting.order_by("event_id").values_list("event_id", flat=True)]

    webhook_endpoint_update(actor=supervisor, endpoint=endpoint, is_active=True)
    world.drain(receiver)

    assert receiver.unique() == world.expected()
    assert receiver.acknowledged[arrived_before:] == queued_order  # all of them, oldest first
    endpoint.refresh_from_db()
    assert endpoint.is_active and endpoint.failing_since is None
