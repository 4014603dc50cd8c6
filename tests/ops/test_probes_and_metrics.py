"""/healthz and /readyz for load balancers, X-Request-ID on every response, /metrics for operators
only, and the Content-Security-Policy header."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from accounts.models import Role
from ops import health
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


def test_healthz_answers_any_host_over_plain_http_even_with_the_https_redirect_on(settings, client):
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["arbiter.example.org"]
    response = client.get("/healthz", HTTP_HOST="10.1.2.3:8000")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert re.fullmatch(r"[0-9a-f]{32}", response["X-Request-ID"])
    # Anything else still gets the host check and the redirect.
    assert client.get("/", HTTP_HOST="arbiter.example.org").status_code == 301


def test_readyz_checks_the_database_and_the_broker(client, settings):
    settings.ARBITER_READYZ_CHECKS = ["database", "broker"]  # the outbox's checks: tests/outbox/test_readiness.py
    response = client.get("/readyz/")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert {name: check["ok"] for name, check in body["checks"].items()} == {"database": True, "broker": True}
    assert response["Cache-Control"] == "no-store"


def test_readyz_runs_registered_checks_and_fails_naming_the_one_that_fails(client, settings, monkeypatch):
    monkeypatch.setitem(health._CHECKS, health.READINESS_WORKER_HEARTBEAT, lambda: "no heartbeat for 300s")
    monkeypatch.setitem(health._CHECKS, health.READINESS_OUTBOX_LAG, lambda: None)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.ARBITER_OUTAGE_RETRY_AFTER_SECONDS)
    checks = response.json()["checks"]
    heartbeat = checks[health.READINESS_WORKER_HEARTBEAT]
    assert (heartbeat["ok"], heartbeat["error"]) == (False, "no heartbeat for 300s")
    assert checks[health.READINESS_OUTBOX_LAG]["ok"] and checks["database"]["ok"]

    settings.ARBITER_READYZ_CHECKS = ["database", "outbox_lag"]  # only these run
    assert set(client.get("/readyz").json()["checks"]) == {"database", "outbox_lag"}
    settings.ARBITER_READYZ_CHECKS = ["database", "nonexistent"]
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["nonexistent"]["error"] == "no such check is registered"


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when this returns: nothing listens there


PROBE = ("from django.test import Client; import json; c = Client(); "
         "r = c.get('/readyz'); print(r.status_code, json.dumps({k: v['ok'] for k, v in r.json()['checks'].items()}, "
         "sort_keys=True)); print(c.get('/healthz').status_code)")


@pytest.mark.parametrize("down, env", [
    ("database", {"DATABASE_URL": "postgres://postgres@127.0.0.1:{port}/arbiter"}),
    ("broker", {"CELERY_BROKER_URL": "redis://127.0.0.1:{port}/13"}),
])
@pytest.mark.slow
@pytest.mark.engine_independent  # manage.py on a closed port, never the suite's database
def test_readyz_fails_when_the_database_or_the_broker_is_down(tmp_path, down, env):
    port = _closed_port()
    environment = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL",
                                                                      "DJANGO_SETTINGS_MODULE"}}
    environment |= {"DEBUG": "1", "ARBITER_VAR_DIR": str(tmp_path), "ALLOWED_HOSTS": "testserver",
                    "ARBITER_READYZ_CHECKS": "database,broker"}
    environment |= {key: value.format(port=port) for key, value in env.items()}
    result = subprocess.run([sys.executable, "manage.py", "shell", "-v", "0", "-c", PROBE], cwd=ROOT,
                            env=environment, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    readyz, healthz = result.stdout.strip().splitlines()[-2:]
    expected = {"database": down != "database", "broker": down != "broker"}
    assert readyz == f"503 {json_dumps(expected)}"
    assert healthz == "200"  # the process itself is up


def json_dumps(value) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def test_every_response_carries_a_request_id_and_a_well_formed_incoming_one_is_kept(client, analyst):
    assert client.get("/api/v1/cases/")["X-Request-ID"]  # 403, anonymous
    assert client.get("/api/v1/no-such-thing/")["X-Request-ID"]  # the API's own 404
    client.force_login(analyst)
    response = client.get("/api/v1/cases/", HTTP_X_REQUEST_ID="lb-1234.abc")
    assert (response.status_code, response["X-Request-ID"]) == (200, "lb-1234.abc")
    forged = client.get(reverse("web:case_list"), HTTP_X_REQUEST_ID="bad id\r\nSet-Cookie: x")
    assert re.fullmatch(r"[0-9a-f]{32}", forged["X-Request-ID"])


def test_metrics_are_for_operators_only(client, analyst, supervisor, tenant, settings):
    assert client.get("/metrics").status_code == 403
    client.force_login(supervisor)
    assert client.get("/metrics").status_code == 403
    admin = UserFactory(username="ops-admin", tenant=tenant, role=Role.ADMIN)
    client.force_login(admin)
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    for name in ("arbiter_runs_started_total", "arbiter_run_step_seconds", "arbiter_model_tokens_total",
                 "arbiter_tool_seconds", "arbiter_run_lease_expiries_total", "arbiter_outbox_lag_seconds",
                 "arbiter_approvals_total", "arbiter_notice_dispatches_total", "arbiter_deadline_crossings_total",
                 "django_http_requests_total_by_method_total"):
        assert f"# TYPE {name.removesuffix('_total')}" in text or f"# TYPE {name}" in text, name
    client.logout()
    settings.ARBITER_METRICS_TOKEN = "scrape-token-123"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-123").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403


def test_pages_and_the_api_docs_carry_a_csp_with_a_per_request_nonce(client, analyst):
    client.force_login(analyst)
    page = client.get(reverse("web:case_list"))
    policy = page["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    docs = client.get("/api/docs/")
    nonce = re.search(r"'nonce-([^']+)'", docs["Content-Security-Policy"]).group(1)
    assert docs.content.decode().count(f'nonce="{nonce}"') == 4  # style, two bundles, the init script
    assert nonce not in client.get("/api/docs/")["Content-Security-Policy"]  # a new one per request


def test_every_inline_style_or_script_in_the_templates_is_allowed_by_the_csp(settings):
    """Templates rendered with a request use the nonce; the error pages are rendered without one,
    so their inline code must be allowed by its hash."""
    import base64
    import hashlib

    allowed = set(settings.CONTENT_SECURITY_POLICY["DIRECTIVES"]["style-src"]) | set(
        settings.CONTENT_SECURITY_POLICY["DIRECTIVES"]["script-src"])
    for template in sorted((ROOT / "templates").rglob("*.html")):
        for tag, body in re.findall(r"<(style|script)>(.*?)</\1>", template.read_text(), re.DOTALL):
            digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            assert f"'sha256-{digest}'" in allowed, (
                f"{template.relative_to(ROOT)}: an inline <{tag}> the CSP blocks; add 'sha256-{digest}' to the "
                f"CSP block of config/settings/security.py, or give it nonce=\"{{{{ request.csp_nonce }}}}\"")


def test_a_check_that_does_not_answer_fails_within_the_timeout(client, settings, monkeypatch):
    import threading

    release = threading.Event()
    monkeypatch.setitem(health._CHECKS, "hangs", lambda: release.wait(30) and None)
    settings.ARBITER_READYZ_TIMEOUT_SECONDS = 1
    try:
        response = client.get("/readyz")
    finally:
        release.set()
    hangs = response.json()["checks"]["hangs"]
    assert response.status_code == 503
    assert (hangs["ok"], hangs["error"]) == (False, "no answer within 1s")
    assert 900 <= hangs["ms"] < 5000
