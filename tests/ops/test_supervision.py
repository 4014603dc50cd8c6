"""Processes that keep serving (real processes, SQLite and the filesystem broker in a var/ of
their own): under `make serve` a SIGKILLed worker, then a SIGKILLed beat, is restarted while the
web answers /healthz throughout (polled every 0.2 s: every answer a 200, none refused); gunicorn's
control socket is the instance's own; an idle worker stops within 5 s and records its stop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.ops.test_run_local import PYTHON, ROOT, BackgroundProcess, _alive, _free_port
from tests.ops.test_serve import Make, _env

pytestmark = [pytest.mark.slow, pytest.mark.engine_independent]  # its processes run on a SQLite of their own


def _status(url: str) -> int | str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:  # refused, reset, timed out: the web is not answering
        return type(error).__name__


def _all_pids(make: Make) -> list[int]:
    return [int(pid) for pid in re.findall(r"\[run\] (?:re)?started \w+ \(pid (\d+)\)", make.output)]


# `make serve` with DEBUG=0 collects static files into the checkout's one STATIC_ROOT (staticfiles/):
# the tests that do so share that folder and never run at the same time (make test: --dist loadgroup).
@pytest.mark.xdist_group("checkout_staticfiles")
def test_make_serve_restarts_a_killed_worker_and_a_killed_beat_while_the_web_keeps_answering(tmp_path):
    port = _free_port()
    env = _env(tmp_path, port, DEBUG="0", SECRET_KEY="serve-test-" + "k" * 50, ALLOWED_HOSTS="127.0.0.1",
               SECURE_SSL_REDIRECT="0", SESSION_COOKIE_SECURE="0", CSRF_COOKIE_SECURE="0", LOG_FORMAT="json")
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    make = Make("serve", env)
    answers: list[int | str] = []
    polling = threading.Event()

    def poll() -> None:
        while not polling.is_set():
            answers.append(_status(f"http://127.0.0.1:{port}/healthz"))
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    try:
        make.wait_for(rf"Arbiter \(gunicorn\) is serving at http://127\.0\.0\.1:{port}/")
        make.wait_for(r"\[worker\].*ready\.")
        assert (tmp_path / "gunicorn.ctl").exists()  # this instance's control socket, not ~/.gunicorn
        worker = make.child_pids()["worker"]
        poller.start()
        time.sleep(1)
        os.killpg(worker, signal.SIGKILL)  # the worker and its pool, no clean-up of any kind
        make.wait_for(r"\[run\] worker exited on its own with code -9; restarting it in 1s", timeout=30)
        restarted = int(make.wait_for(r"\[run\] restarted worker \(pid (\d+)\)", timeout=30).group(1))
        assert restarted != worker and _alive(restarted)
        make.wait_for(r"(?s)restarted worker.*\[worker\].*ready\.", timeout=120)
        make.wait_for(r"\[beat  \].*beat: Starting", timeout=60)
        beat = make.child_pids()["beat"]
        os.killpg(beat, signal.SIGKILL)  # beat crashes too: restarted on its own, the web unaffected
        make.wait_for(r"\[run\] beat exited on its own with code -9; restarting it in 1s", timeout=30)
        restarted_beat = int(make.wait_for(r"\[run\] restarted beat \(pid (\d+)\)", timeout=30).group(1))
        assert restarted_beat != beat and _alive(restarted_beat)
        make.wait_for(r"(?s)restarted beat.*\[beat  \].*beat: Starting", timeout=120)
        time.sleep(1)
        polling.set()
        poller.join(timeout=10)
        assert answers and set(answers) == {200}, answers  # never refused, never a 5xx
        print(f"/healthz polled {len(answers)} times every 0.2 s through both crashes: all 200")
        assert make.process.poll() is None and "stopping the others" not in make.output
        status = _status(f"http://127.0.0.1:{port}/readyz")
        assert status in (200, 503)  # answered (503 only until the new worker's heartbeat lands)
    finally:
        polling.set()
        for pid in _all_pids(make):
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
        make.cleanup()


def test_an_idle_worker_stops_within_5_seconds_and_records_its_stop(tmp_path):
    env = _env(tmp_path, _free_port(), DEBUG="1")
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    worker = BackgroundProcess([str(ROOT / ".venv/bin/celery") if (ROOT / ".venv/bin/celery").exists()
                                else os.path.join(os.path.dirname(PYTHON), "celery"),
                                "-A", "config", "worker", "--loglevel=INFO", "--concurrency=1",
                                "--hostname=idle@%h"], env)
    try:
        worker.wait_for(r"ready\.", timeout=120)
        time.sleep(4)  # idle: a few drain cycles and heartbeat ticks
        started = time.monotonic()
        worker.process.send_signal(signal.SIGTERM)
        worker.process.wait(timeout=30)
        took = time.monotonic() - started
    finally:
        if worker.process.poll() is None:
            worker.process.kill()
    assert worker.process.returncode == 0, worker.output[-3000:]
    assert took < 5, f"an idle worker took {took:.1f}s to stop"
    rows = subprocess.run([PYTHON, "-c", "import django, json; django.setup(); from outbox.models import "
                           "WorkerHeartbeat; print(json.dumps([r.stopped_at is not None for r in "
                           "WorkerHeartbeat.objects.all()]))"],
                          cwd=ROOT, env=env | {"DJANGO_SETTINGS_MODULE": "config.settings"}, capture_output=True,
                          text=True, timeout=120)
    assert json.loads(rows.stdout.strip().splitlines()[-1]) == [True], rows.stderr
