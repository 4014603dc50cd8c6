"""Real processes for the fault-injection tests: a throwaway Redis per test on a free port of its
own (stopped and started by the tests, so two tests can run side by side under pytest-xdist), a TCP proxy in front of PostgreSQL (the tests cut it to make the database
unreachable for the workers without touching the machine's shared server), and Celery workers and
beat started against them. Nothing here stops a shared service."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
CELERY = ROOT / ".venv" / "bin" / "celery"


def free_port() -> int:
    """A port nothing listens on now, chosen by the kernel (never a fixed number two tests share)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(predicate, *, timeout: float, what: str, poll: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


class RedisServer:
    """redis-server on 127.0.0.1:<a free port> with an append-only file in a temp folder, so a
    restart keeps what was queued (as a production broker with persistence would). The port is
    chosen once: a restart comes back on the same one, as a broker's address does."""

    def __init__(self, folder: Path, port: int | None = None):
        self.folder, self.port, self.process = folder, port or free_port(), None
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def ready():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        wait_until(ready, timeout=15, what="redis-server to answer")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)


class TcpProxy:
    """127.0.0.1:<port> → target. cut() drops every connection and refuses new ones (the
    database "is down" for whoever connects through it); restore() accepts again."""

    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.is_cut = False
        self._stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._stopping:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self.is_cut:
                client.close()  # refused: the connection opens and closes at once
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update({client, upstream})
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def cut(self):
        self.is_cut = True
        with self._lock:
            for s in list(self._open):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self._open.clear()

    def restore(self):
        self.is_cut = False

    def close(self):
        self._stopping = True
        self.cut()
        self._sock.close()


def database_url(*, port: int | None = None) -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{port or db['PORT'] or 5432}/{db['NAME']}"


class Cluster:
    """Celery workers and beat for one test; every process in its own session (killed as a group)."""

    def __init__(self, tmp_path: Path, env: dict):
        self.tmp_path, self.env, self.processes = tmp_path, env, {}
        (tmp_path / "log").mkdir(exist_ok=True)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.tmp_path / "log" / f"{name}.log", "ab")
        process = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        self.processes[name] = process
        return process

    def worker(self, name: str, concurrency: int = 1) -> subprocess.Popen:
        return self._spawn(name, [str(CELERY), "-A", "config", "worker", f"--concurrency={concurrency}",
                                  "--pool=prefork", "--without-gossip", "--without-mingle", "--loglevel=INFO",
                                  "-n", f"{name}@%h"])

    def beat(self) -> subprocess.Popen:
        return self._spawn("beat", [str(CELERY), "-A", "config", "beat", "--loglevel=INFO",
                                    "-s", str(self.tmp_path / "celerybeat-schedule")])

    def supervise(self) -> list[str]:
        """What systemd/supervisord would do: start again a worker that exited. (A Celery worker on
        Redis can exit with "Unrecoverable error: AttributeError ... 'hostname'" when the broker
        goes away while it acknowledges a message — a kombu race, not ours; supervisors restart it.)"""
        restarted = []
        for name, process in list(self.processes.items()):
            if name.startswith("w") and process.poll() is not None:
                self.processes.pop(name)
                self.worker(name)
                restarted.append(name)
        return restarted

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()

    def manage(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted((self.tmp_path / "log").glob("*.log")))

    def stop(self) -> None:
        for process in list(self.processes.values()):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for name in list(self.processes):
            process = self.processes.pop(name)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def cluster_env(tmp_path: Path, *, broker_url: str, db_port: int | None = None, **extra) -> dict:
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": database_url(port=db_port),
        "CELERY_BROKER_URL": broker_url,
        "ARBITER_VAR_DIR": str(tmp_path / "var"),
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(tmp_path / "mail"),
        "ARBITER_RUN_LEASE_SECONDS": "6",
        "ARBITER_REAP_INTERVAL_SECONDS": "2",
        "ARBITER_WORKER_HEARTBEAT_SECONDS": "1",
        "ARBITER_OUTBOX_RELAY_INTERVAL_SECONDS": "1",
        "ARBITER_TENANT_MAX_CONCURRENT_RUNS": "8",
        "PYTHONUNBUFFERED": "1",
    })
    env.update({key: str(value) for key, value in extra.items()})
    return env


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def cluster_factory(tmp_path):
    made = []

    def make(env: dict) -> Cluster:
        cluster = Cluster(tmp_path, env)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()
