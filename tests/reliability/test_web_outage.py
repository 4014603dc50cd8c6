"""The database unreachable under a real gunicorn (its connections go through a TCP proxy the test
cuts; the machine's PostgreSQL is never stopped): every request that needs the database answers
503 with Retry-After — JSON under /api/, the page in the browser — none answers 500, and the site
answers normally again once the database is back."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection
from django.test import Client

from tests.reliability.conftest import CELERY, ROOT, TcpProxy, cluster_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, cookie: str = "") -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except urllib.error.URLError:  # not listening (yet): no answer at all
        return 0, {}, b""


def test_every_request_during_a_database_outage_is_a_503_never_a_500(analyst, case, tmp_path):
    db = connection.settings_dict
    proxy = TcpProxy(db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432))
    port = _free_port()
    env = cluster_env(tmp_path, broker_url="memory://", db_port=proxy.port, ALLOWED_HOSTS="127.0.0.1",
                      ARBITER_OUTAGE_RETRY_AFTER_SECONDS=5)
    browser = Client()
    browser.force_login(analyst)  # a session row in the database, as after a real login
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    gunicorn = subprocess.Popen([str(CELERY.with_name("gunicorn")), "config.wsgi:application", "--bind",
                                 f"127.0.0.1:{port}", "--workers", "2", "--config", "config/gunicorn.conf.py"],
                                cwd=ROOT, env=env, stdout=open(tmp_path / "web.log", "ab"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    paths = ["/", f"/cases/{case.reference}/", "/api/v1/cases/", f"/api/v1/cases/{case.reference}/"]
    try:
        wait_until(lambda: _get(base + "/api/v1/cases/", cookie)[0] == 200, timeout=90, what="gunicorn to serve")
        proxy.cut()
        answers = []
        for _ in range(3):
            for path in paths:
                status, headers, body = _get(base + path, cookie)
                answers.append((path, status, headers.get("Retry-After"), headers.get("Content-Type", "")))
                if path.startswith("/api/"):
                    assert json.loads(body)["code"] == "unavailable"
                else:
                    assert b"Arbiter is briefly unavailable" in body
            time.sleep(1)
        anonymous = _get(base + "/api/v1/cases/")[0]
        proxy.restore()
        wait_until(lambda: _get(base + "/api/v1/cases/", cookie)[0] == 200, timeout=30,
                   what="the site to answer again once the database is back")
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=30)
        proxy.close()
    assert {status for _, status, _, _ in answers} == {503}, answers
    assert {retry for _, _, retry, _ in answers} == {"5"}
    assert all(kind.startswith("application/json") == path.startswith("/api/") for path, _, _, kind in answers)
    assert anonymous in (401, 403, 503)  # refused for lack of credentials, or the outage: never a 500
    log = (tmp_path / "web.log").read_text()
    assert log.count("the database failing") <= 2  # one warning per outage and gunicorn process
    assert "Traceback" not in log
