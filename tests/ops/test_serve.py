"""`make serve` (gunicorn + Celery worker + beat) and `make run` for real, through make itself:
they start, answer (probes, static files via WhiteNoise, JSON logs with request ids) and stop
every child when make's own process — not its group — is terminated.

Real processes on SQLite and the filesystem broker in a var/ of their own, on a free port."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.ops.test_run_local import BackgroundProcess, _alive, _free_port, _left_running

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

pytestmark = [pytest.mark.slow, pytest.mark.engine_independent]  # its processes run on a SQLite of their own


class Make(BackgroundProcess):
    """`make <target>` in the background (-o install: never reinstall the shared virtualenv)."""

    what = "make"

    def __init__(self, target: str, env: dict[str, str]):
        super().__init__(["make", "--no-print-directory", "-o", "install", target], env)

    def launcher_pid(self) -> int:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])

    def child_pids(self) -> dict[str, int]:
        return {name: int(pid) for name, pid in re.findall(r"\[run\] started (\w+) \(pid (\d+)\)", self.output)}

    def cleanup(self) -> None:
        for pid in self.child_pids().values():
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.kill()


def _env(var_dir: Path, port: int, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "EMAIL_FILE_PATH",
                          "PROMETHEUS_MULTIPROC_DIR", "MAKEFLAGS", "MFLAGS"}}
    return env | {"ARBITER_VAR_DIR": str(var_dir), "HOST": "127.0.0.1", "PORT": str(port),
                  "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend"} | extra


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:  # a 503 from /readyz is an answer too
        return error.code, dict(error.headers), error.read()


def _terminate_make_alone_and_expect_everything_to_stop(make: Make) -> None:
    launcher = make.launcher_pid()
    pids = make.child_pids()
    assert set(pids) == {"web", "worker", "beat"}
    os.kill(make.process.pid, signal.SIGTERM)  # make's own process, not its group
    make.process.wait(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (_alive(launcher) or _left_running(pids)):
        time.sleep(0.3)
    assert not _alive(launcher)
    assert _left_running(pids) == []
    assert "[run] got SIGTERM; stopping web, worker and beat" in make.output


# `make serve` with DEBUG=0 collects static files into the checkout's one STATIC_ROOT (staticfiles/):
# the tests that do so share that folder and never run at the same time (make test: --dist loadgroup).
@pytest.mark.xdist_group("checkout_staticfiles")
def test_make_serve_runs_gunicorn_worker_and_beat_and_stops_them_with_make(tmp_path):
    port = _free_port()
    env = _env(tmp_path, port, DEBUG="0", SECRET_KEY="serve-test-" + "k" * 50, ALLOWED_HOSTS="127.0.0.1",
               SECURE_SSL_REDIRECT="0", SESSION_COOKIE_SECURE="0", CSRF_COOKIE_SECURE="0", LOG_FORMAT="json")
    refused = subprocess.run(["make", "--no-print-directory", "-o", "install", "serve"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "migration(s) not applied" in refused.stdout and "manage.py migrate" in refused.stdout

    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    make = Make("serve", env)
    try:
        make.wait_for(rf"Arbiter \(gunicorn\) is serving at http://127\.0\.0\.1:{port}/")
        make.wait_for(r"\[worker\].*ready\.")
        make.wait_for(r"\[beat  \].*beat: Starting")
        assert "Booting worker" in make.output  # gunicorn's own line, through the same formatter

        status, headers, body = _get(f"http://127.0.0.1:{port}/healthz")
        assert (status, json.loads(body)) == (200, {"status": "ok"})
        request_id = headers["X-Request-ID"]
        for _ in range(40):  # ready once the worker's first heartbeat is committed
            status, _headers, body = _get(f"http://127.0.0.1:{port}/readyz")
            if status == 200:
                break
            time.sleep(0.25)
        assert status == 200, body
        assert json.loads(body)["checks"].keys() >= {"database", "broker", "worker_heartbeat", "outbox_lag"}
        status, _headers, body = _get(f"http://127.0.0.1:{port}/static/css/arbiter.css")  # WhiteNoise
        assert status == 200 and body
        line = make.wait_for(rf"\[web   \] (\{{.*\"request_id\": \"{request_id}\".*\}})").group(1)
        assert json.loads(line)["path"] == "/healthz"
        assert (tmp_path / "prometheus").is_dir()

        _terminate_make_alone_and_expect_everything_to_stop(make)
    finally:
        make.cleanup()


def test_make_run_answers_other_machines_and_stops_its_children_when_makes_own_process_is_terminated(tmp_path):
    port = _free_port()
    make = Make("run", _env(tmp_path, port, HOST="0.0.0.0"))
    try:
        make.wait_for(r"Arbiter is running at")
        assert "HOST=0.0.0.0 with DEBUG: ALLOWED_HOSTS=*" in make.output
        # Another machine names this one as it knows it: not refused with a 400.
        request = urllib.request.Request(f"http://127.0.0.1:{port}/accounts/login/",
                                         headers={"Host": f"arbiter-laptop.local:{port}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        make.wait_for(r"\[worker\].*ready\.")
        _terminate_make_alone_and_expect_everything_to_stop(make)
    finally:
        make.cleanup()
