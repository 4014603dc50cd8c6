"""Webhooks cannot reach inside: loopback, private, link-local, metadata and other non-public
addresses (in every spelling the resolver accepts) are refused at registration and again at each
delivery; credentials in URLs are refused; redirects are not followed; the connection goes to the
address that was checked; the operator's allowlist opens named networks; and the deliveries API
shows a status code, a duration and an error category, never the receiver's body or raw errors."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from rest_framework import serializers

from core.errors import Invalid
from integrations import webhook_address
from integrations.models import DeliveryStatus, WebhookAttempt, WebhookDelivery, WebhookEndpoint
from integrations.webhook_address import address_refusal, literal_address, webhook_target
from integrations.webhook_delivery import webhook_deliver
from integrations.webhooks import webhook_endpoint_create
from tests.api.conftest import assert_error
from tests.conftest import PUBLIC_TEST_ADDRESS
from tests.factories import make_case
from tests.helpers import assert_nothing_changed
from tests.integrations.conftest import Receiver

pytestmark = pytest.mark.django_db

REFUSED_URLS = [
    "http://127.0.0.1/hook",
    "http://localhost/hook",
    "http://2130706433/hook",
    "http://0x7f.1/hook",
    "http://0x7f000001/hook",
    "http://127.1/hook",
    "http://0177.0.0.1/hook",
    "http://0.0.0.0/hook",
    "http://[::]/hook",
    "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://[::ffff:7f00:1]/hook",
    "http://[::127.0.0.1]/hook",  # IPv4-compatible
    "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of 169.254.169.254
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/hook",
    "http://172.16.0.1/hook",
    "http://192.168.1.1/hook",
    "http://100.64.0.1/hook",
    "http://224.0.0.1/hook",
    "http://240.0.0.1/hook",
    "http://255.255.255.255/hook",
    "http://[fe80::1]/hook",
    "http://[fc00::1]/hook",
    "http://[ff02::1]/hook",
    "http://127.0.0.1:5432/",
    "http://localhost:6379/",
    "http://loopback.example/hook",  # a name the test resolver answers with 127.0.0.1
    "http://metadata.example/hook",  # ... with 169.254.169.254
    "http://mixed.example/hook",  # one public and one private address: ANY private one refuses
    "http://user:pass@hooks.example.org/hook",
    "http://user@hooks.example.org/hook",
    "https://:secret@hooks.example.org/hook",
]


@pytest.fixture
def internal_names(dns):
    dns["loopback.example"] = ["127.0.0.1"]
    dns["metadata.example"] = ["169.254.169.254"]
    dns["mixed.example"] = [PUBLIC_TEST_ADDRESS, "10.0.0.1"]
    return dns


def _nothing_registered():
    return {"endpoints": WebhookEndpoint.objects.count, "deliveries": WebhookDelivery.objects.count}


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_registration_refuses_internal_targets_through_the_api(api, supervisor, internal_names, url):
    with assert_nothing_changed(extra=_nothing_registered()):
        response = api(supervisor).post("/api/v1/webhooks/", {"url": url, "event_types": ["case.changed"]},
                                        format="json")
        assert_error(response, *_refused_as(url), fields={"url"})


def _refused_as(url: str) -> tuple[int, str]:
    """The URL's text is refused with 400 `invalid` (DRF's URL field, or credentials in it); a host
    that leads where the deployment may not send is 422 `url_unreachable` (DNS and settings decide)."""
    try:
        serializers.URLField().run_validation(url)
    except serializers.ValidationError:
        return 400, "invalid"
    return (400, "invalid") if "@" in url else (422, "url_unreachable")


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_the_service_itself_refuses_internal_targets(supervisor, internal_names, url):
    """The API's URL field already refuses some spellings (2130706433, 0x7f.1 ...); the service
    must refuse every one by itself, with a message saying why."""
    with assert_nothing_changed(extra=_nothing_registered()), pytest.raises(Invalid) as refused:
        webhook_endpoint_create(actor=supervisor, url=url, event_types=["case.changed"])
    credentials = "@" in url
    assert refused.value.message == ("The webhook URL must not hold a user name or password." if credentials
                                     else "The webhook URL must reach a public internet address.")
    assert list(refused.value.fields) == ["url"]
    assert refused.value.code == ("invalid" if credentials else "url_unreachable")


def test_the_api_message_says_why(api, supervisor, internal_names):
    response = api(supervisor).post("/api/v1/webhooks/", {"url": "http://loopback.example/x",
                                                          "event_types": ["case.changed"]}, format="json")
    body = response.json()
    assert body["detail"] == "The webhook URL must reach a public internet address."
    assert "ARBITER_WEBHOOK_ALLOWED_NETWORKS" in body["fields"]["url"][0]
    assert "127.0.0.1" not in json.dumps(body)  # the resolved address is not revealed


def test_numeric_hosts_are_read_as_the_resolver_reads_them():
    for spelling in ("2130706433", "0x7f.1", "0x7f000001", "127.1", "0177.0.0.1", "127.0.0.1"):
        assert str(literal_address(spelling)) == "127.0.0.1", spelling
    assert literal_address("hooks.example.org") is None
    assert address_refusal(literal_address("8.8.8.8")) is None
    assert address_refusal(literal_address("::ffff:8.8.8.8")) is None  # mapped public: fine
    assert address_refusal(literal_address("64:ff9b::808:808")) is None  # NAT64 of a public address
    assert address_refusal(literal_address("2002:808:808::")) is None  # 6to4 of a public address
    assert address_refusal(literal_address("64:ff9b::7f00:1")).startswith("loopback")
    assert address_refusal(literal_address("64:ff9b:1::a00:1")) is not None  # local-use NAT64


def test_the_real_resolver_is_checked_too(monkeypatch, settings):
    """Through the system resolver (localhost is in /etc/hosts: no network needed)."""
    monkeypatch.undo()  # the suite's fake resolver off: the real getaddrinfo answers
    assert webhook_address.resolve_host("localhost", 80)[0] in ("127.0.0.1", "::1")
    settings.ARBITER_WEBHOOK_ALLOW_HTTP = True
    with pytest.raises(webhook_address.TargetRefused) as refused:
        webhook_target("http://localhost/hook")
    assert refused.value.category == "refused_address"


def test_a_name_that_does_not_resolve_is_refused(api, supervisor):
    with assert_nothing_changed(extra=_nothing_registered()):
        response = api(supervisor).post("/api/v1/webhooks/", {"url": "https://nowhere.example/x",
                                                              "event_types": ["case.changed"]}, format="json")
        assert_error(response, 422, "url_unreachable", fields={"url"})
    assert response.json()["detail"] == "The webhook URL's host does not resolve."


def test_a_resolver_outage_is_a_503_and_registers_nothing(api, supervisor, dns):
    def outage():
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    dns["hooks.example.org"] = outage
    with assert_nothing_changed(extra=_nothing_registered()):
        response = api(supervisor).post("/api/v1/webhooks/", {"url": "https://hooks.example.org/x",
                                                              "event_types": ["case.changed"]}, format="json")
        assert_error(response, 503, "unavailable")


def test_changing_the_url_to_an_internal_one_is_refused(api, supervisor):
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url="https://hooks.example.org/x",
                                          event_types=["case.changed"])
    with assert_nothing_changed(extra=_nothing_registered()):
        response = api(supervisor).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"url": "http://169.254.169.254/"},
                                         format="json")
        assert_error(response, 422, "url_unreachable", fields={"url"})
    endpoint.refresh_from_db()
    assert endpoint.url == "https://hooks.example.org/x"


def test_the_admin_form_refuses_an_internal_url(client, admin_user):
    client.force_login(admin_user)
    with assert_nothing_changed(extra=_nothing_registered()):
        response = client.post("/admin/integrations/webhookendpoint/add/", {
            "url": "https://127.0.0.1/x", "description": "", "event_types": ["case.changed"]})
    assert response.status_code == 200
    assert "The webhook URL must reach a public internet address." in response.context["adminform"].form.errors["url"]


# --- at delivery -----------------------------------------------------------------------------------

@pytest.fixture
def listener():
    """A real HTTP server on 127.0.0.1 that no setting allows: whatever reaches it leaked."""
    listener = Receiver()
    yield listener
    listener.close()


def test_a_name_that_turns_private_after_registration_is_refused_at_delivery(analyst, supervisor, dns, listener):
    port = listener.server.server_address[1]
    dns["rebind.example"] = [PUBLIC_TEST_ADDRESS]
    endpoint, _ = webhook_endpoint_create(actor=supervisor, url=f"http://rebind.example:{port}/hook",
                                          event_types=["case.changed"])
    dns["rebind.example"] = ["127.0.0.1"]  # the name now points inside
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get(endpoint=endpoint).pk)
    assert (delivery.status, delivery.last_status_code, delivery.last_error_category) == (
        DeliveryStatus.PENDING, None, "refused_address")
    attempt = WebhookAttempt.objects.get()
    assert (attempt.status_code, attempt.error_category, attempt.succeeded) == (None, "refused_address", False)
    time.sleep(0.3)
    assert listener.received() == []  # no request left


def test_the_connection_goes_to_the_checked_address_with_the_named_host(analyst, supervisor, dns, receiver):
    """The name is resolved once per delivery and the connection goes to that answer: a second
    lookup (by the HTTP client) would meet a resolver that no longer answers, and fail."""
    port = receiver.server.server_address[1]
    answers = [["127.0.0.1"], ["127.0.0.1"]]
    dns["pinned.example"] = lambda: answers.pop(0)  # one answer at registration, one at delivery
    webhook_endpoint_create(actor=supervisor, url=f"http://pinned.example:{port}/hook?x=1",
                            event_types=["case.changed"])
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert delivery.status == DeliveryStatus.SUCCEEDED and answers == []
    assert receiver.next()["headers"]["Host"] == f"pinned.example:{port}"


def test_the_allowlist_opens_a_network_and_nothing_else(api, supervisor, settings, listener):
    url = f"http://127.0.0.1:{listener.server.server_address[1]}/hook"
    payload = {"url": url, "event_types": ["case.changed"]}
    with assert_nothing_changed(extra=_nothing_registered()):
        assert_error(api(supervisor).post("/api/v1/webhooks/", payload, format="json"), 422, "url_unreachable",
                     fields={"url"})
    settings.ARBITER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    assert api(supervisor).post("/api/v1/webhooks/", payload, format="json").status_code == 201
    refused = {"url": "http://10.0.0.1/hook", "event_types": ["case.changed"]}
    with assert_nothing_changed(extra=_nothing_registered()):
        assert_error(api(supervisor).post("/api/v1/webhooks/", refused, format="json"), 422, "url_unreachable",
                     fields={"url"})


def test_an_allowed_local_receiver_gets_the_delivery(analyst, supervisor, settings, listener):
    settings.ARBITER_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    webhook_endpoint_create(actor=supervisor, url=f"http://127.0.0.1:{listener.server.server_address[1]}/hook",
                            event_types=["case.changed"])
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert (delivery.status, delivery.last_status_code, delivery.last_error_category) == (
        DeliveryStatus.SUCCEEDED, 200, "")
    assert json.loads(listener.next()["body"])["type"] == "case.created"


def test_a_redirect_is_a_failed_delivery_and_is_not_followed(analyst, endpoint, receiver, listener):
    receiver.statuses = [302]
    receiver.location = f"http://127.0.0.1:{listener.server.server_address[1]}/elsewhere"
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert (delivery.status, delivery.last_status_code, delivery.last_error_category) == (
        DeliveryStatus.PENDING, 302, "redirect")
    assert len(receiver.received()) == 1
    time.sleep(0.3)
    assert listener.received() == []


def test_a_slow_receiver_is_a_timeout_with_its_duration(analyst, endpoint, receiver, settings):
    settings.ARBITER_WEBHOOK_TIMEOUT_SECONDS = 1
    receiver.delay = 3
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    attempt = WebhookAttempt.objects.get()
    assert (delivery.last_error_category, attempt.error_category, attempt.status_code) == ("timeout", "timeout", None)
    assert 900 <= attempt.duration_ms < 2500  # stopped at the timeout, not at the reply (3 s)


def test_a_tls_failure_is_categorised(analyst, supervisor, receiver):
    """https to a plain HTTP listener: the handshake fails."""
    webhook_endpoint_create(actor=supervisor, url=f"https://127.0.0.1:{receiver.server.server_address[1]}/hook",
                            event_types=["case.changed"])
    make_case(actor=analyst)
    delivery = webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    assert (delivery.last_status_code, delivery.last_error_category) == (None, "tls")


def test_the_deliveries_api_shows_no_body_and_no_raw_error(api, analyst, supervisor, endpoint, receiver, settings):
    receiver.statuses = [500]
    receiver.reply = b"db_password=hunter2"
    make_case(actor=analyst)
    webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    receiver.close()  # the next attempt meets a refused connection
    WebhookDelivery.objects.update(next_attempt_at=WebhookDelivery.objects.get().created_at)
    webhook_deliver(delivery_id=WebhookDelivery.objects.get().pk)
    response = api(supervisor).get(f"/api/v1/webhooks/{endpoint.pk}/deliveries/")
    text = response.content.decode()
    for leak in ("db_password", "hunter2", "receiver failed", "refused", "Errno", "Error"):
        assert leak not in text, leak
    delivery = response.json()["results"][0]
    assert "last_error" not in delivery and delivery["last_error_category"] == "connect"
    assert [(a["number"], a["status_code"], a["error_category"]) for a in delivery["attempt_log"]] == [
        (1, 500, "http_status"), (2, None, "connect")]
    assert set(delivery["attempt_log"][0]) == {"number", "started_at", "duration_ms", "status_code",
                                               "error_category", "succeeded"}


@pytest.mark.slow  # starts a Python process
@pytest.mark.engine_independent  # imports the settings, connects to no database
def test_a_bad_allowed_network_stops_the_process_with_a_message():
    env = {**os.environ, "DEBUG": "1", "ARBITER_WEBHOOK_ALLOWED_NETWORKS": "10.0.0.0/8,not-a-network"}
    result = subprocess.run([sys.executable, "-c", "import config.settings"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0
    assert "ARBITER_WEBHOOK_ALLOWED_NETWORKS: 'not-a-network' is not a network" in result.stderr
