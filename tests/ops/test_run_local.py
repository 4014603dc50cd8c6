"""`make run` for real: scripts/run_local.py starts the web server, a Celery worker and beat as
separate processes on a fresh SQLite database, a notice approved in another process is sent by
the worker, Ctrl-C/SIGTERM stops everything cleanly, a second run reuses the database, and a
child that dies takes the launcher down with a non-zero exit.

These tests start real processes and need no service: they use their own var/ directory and a
free port, never the developer's database."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BackgroundProcess:
    """A command in the background from the project root, its output collected line by line."""

    what = "the process"

    def __init__(self, command: list[str], env: dict[str, str]):
        self.env = env
        self.lines: list[str] = []
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.output)
            if match:
                return match
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} not seen in the output of {self.what}:\n{self.output[-4000:]}")


class Launcher(BackgroundProcess):
    """scripts/run_local.py in the background, its output collected line by line. By default on
    its own SQLite database and filesystem broker; `services` points it at others."""

    what = "run_local"

    def __init__(self, var_dir: Path, port: int, services: dict[str, str] | None = None):
        env = {key: value for key, value in os.environ.items()
               if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}}
        env |= {"DEBUG": "1", "ARBITER_VAR_DIR": str(var_dir), "HOST": "127.0.0.1", "PORT": str(port),
                "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend"}
        env |= services or {}
        env.pop("EMAIL_FILE_PATH", None)
        self.port = port
        self.var_dir = var_dir
        super().__init__([PYTHON, "scripts/run_local.py"], env)

    def child_pids(self) -> dict[str, int]:
        return {name: int(pid) for name, pid in re.findall(r"\[run\] started (\w+) \(pid (\d+)\)", self.output)}

    def manage(self, *args: str) -> str:
        result = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        for pid in self.child_pids().values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by anyone) is not running any more.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _left_running(pids: dict[str, int]) -> list[str]:
    """Children, or anything they started in their session (a celery pool process), still running."""
    sessions = set(pids.values())
    left = [name for name, pid in pids.items() if _alive(pid)]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().split(")")[-1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        state, session = fields[0], int(fields[3])
        if session in sessions and state != "Z":
            left.append(f"pid {stat.parent.name} in session {session}")
    return left


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status


ENQUEUE = """
from django.db import transaction
from accounts.models import User
from cases.models import Notice
from cases.services import notice_approve
from cases.task_queue import notice_dispatch_enqueue
supervisor = User.objects.get(username="supervisor")
notice = Notice.objects.filter(tenant=supervisor.tenant, status="pending_approval").order_by("pk").first()
with transaction.atomic():
    notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    notice_dispatch_enqueue(notice_id=notice.pk, actor_user_id=supervisor.pk)
print("ENQUEUED", notice.pk, notice.recipient)
"""

STATUS = """
from cases.models import Notice
notice = Notice.objects.get(pk={pk})
print("STATUS", notice.status, notice.external_message_id)
"""


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("run_local_var")


# The two tests share one var/ folder, the second reusing the database the first left: one group runs
# on one xdist worker, in this order (tests/longest_first.py keeps it).
@pytest.mark.xdist_group("make_run_var")
@pytest.mark.engine_independent  # make run on a SQLite database of its own
def test_make_run_serves_pages_runs_tasks_in_the_worker_and_stops_cleanly(var_dir):
    launcher = Launcher(var_dir, _free_port())
    try:
        launcher.wait_for(r"Arbiter is running at http://127\.0\.0\.1:\d+/")
        assert "42 cases created" in launcher.output
        for username in ("analyst", "analyst_b", "supervisor", "auditor", "admin", "analyst2", "supervisor2"):
            assert re.search(rf"^\s+{username}\s+\w+\s+\w+", launcher.output, re.MULTILINE), username
        assert _get(f"http://127.0.0.1:{launcher.port}/admin/login/") == 200
        launcher.wait_for(r"\[worker\].*ready\.")
        assert "ready." in (var_dir / "log" / "worker.log").read_text()

        outbox = var_dir / "outbox"
        assert not list(outbox.glob("*"))
        notice_pk, recipient = re.search(r"ENQUEUED (\d+) (\S+)", launcher.manage("shell", "-c", ENQUEUE)).groups()

        # The worker, a separate process, picks the task from the filesystem broker and sends.
        launcher.wait_for(r"notice_dispatch_task\[[^\]]+\] succeeded in [\d.]+s: 'sent'", timeout=60)
        emails = list(outbox.glob("*.log"))
        assert len(emails) == 1
        content = emails[0].read_text()
        assert f"To: {recipient}" in content
        assert f"X-Arbiter-Notice: {notice_pk}" in content
        status = launcher.manage("shell", "-c", STATUS.format(pk=notice_pk))
        assert re.search(r"STATUS sent <.+@arbiter\.example>", status)

        pids = launcher.child_pids()
        assert set(pids) == {"web", "worker", "beat"}
        launcher.process.send_signal(signal.SIGTERM)
        assert launcher.process.wait(timeout=60) == 0
        assert "[run] stopped" in launcher.output
        assert _left_running(pids) == []
    finally:
        launcher.stop()


@pytest.mark.xdist_group("make_run_var")
@pytest.mark.engine_independent  # make run on a SQLite database of its own
def test_a_second_run_reuses_the_database_and_a_dying_child_stops_everything(var_dir):
    if not (var_dir / "arbiter.sqlite3").exists():
        pytest.skip("needs the database left by the previous test")
    launcher = Launcher(var_dir, _free_port())
    try:
        launcher.wait_for(r"Arbiter is running at")
        assert "seed_demo: 0 cases created, 42 already present" in launcher.output
        # The classifier is trained before the processes start; here it is (the suite's shared one).
        assert re.search(r"\[run\] offline analyst: manage.py train_analyst\n"
                         r"The offline analyst's classifier is already trained: .+ Nothing to do\.\n", launcher.output)
        launcher.wait_for(r"\[worker\].*ready\.")
        pids = launcher.child_pids()

        os.kill(pids["worker"], signal.SIGKILL)

        assert launcher.process.wait(timeout=60) == 1
        assert "worker exited on its own with code -9; stopping the others" in launcher.output
        assert _left_running(pids) == []
    finally:
        launcher.stop()


@pytest.mark.engine_independent  # make run on a SQLite database of its own
def test_a_busy_port_is_refused_with_a_message_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        launcher = Launcher(tmp_path, port)
        try:
            assert launcher.process.wait(timeout=60) == 2
        finally:
            launcher.stop()
    launcher._reader.join(timeout=5)
    assert f"port {port} on 127.0.0.1 is already in use" in launcher.output
    assert f"make run PORT={port + 1}" in launcher.output
    assert not (tmp_path / "arbiter.sqlite3").exists()  # nothing was prepared


REDIS_URL = os.environ.get("ARBITER_TEST_REDIS_URL", "redis://127.0.0.1:6379/2")


@pytest.fixture
def postgres_database():
    """A database of its own for `make run`, beside the suite's (dropped afterwards)."""
    import dj_database_url
    import psycopg

    url = os.environ["DATABASE_URL"]
    params = dj_database_url.parse(url)
    name = f"{params['NAME']}_run_local"
    admin = psycopg.connect(host=params["HOST"] or "127.0.0.1", port=params["PORT"] or 5432,
                            user=params["USER"], password=params["PASSWORD"] or None, dbname="postgres",
                            autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.mark.postgres
def test_make_run_on_postgresql_and_redis_by_environment_variables_only(tmp_path, postgres_database):
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"needs Redis at {REDIS_URL} (.ci/run starts it; ARBITER_TEST_REDIS_URL to change)")
    launcher = Launcher(tmp_path, _free_port(),
                        services={"DATABASE_URL": postgres_database, "CELERY_BROKER_URL": REDIS_URL})
    try:
        launcher.wait_for(r"Arbiter is running at")
        assert f"[run] database: {postgres_database}" in launcher.output
        assert "Celery worker + beat on redis://" in launcher.output
        assert "42 cases created" in launcher.output
        launcher.wait_for(r"\[worker\].*Connected to redis://")
        launcher.wait_for(r"\[worker\].*ready\.")
        notice_pk, _ = re.search(r"ENQUEUED (\d+) (\S+)", launcher.manage("shell", "-c", ENQUEUE)).groups()
        launcher.wait_for(r"notice_dispatch_task\[[^\]]+\] succeeded in [\d.]+s: 'sent'", timeout=60)
        assert len(list((tmp_path / "outbox").glob("*.log"))) == 1
        assert "STATUS sent" in launcher.manage("shell", "-c", STATUS.format(pk=notice_pk))
        assert not (tmp_path / "arbiter.sqlite3").exists()  # nothing fell back to SQLite
        pids = launcher.child_pids()
        launcher.process.send_signal(signal.SIGTERM)
        assert launcher.process.wait(timeout=60) == 0
        assert _left_running(pids) == []
    finally:
        launcher.stop()
