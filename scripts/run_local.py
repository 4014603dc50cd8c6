#!/usr/bin/env python
"""`make run`: everything on one machine with no service installed.

Prepares var/ (SQLite database, Celery filesystem broker, email outbox, media), migrates, loads
the demo data (idempotent, so a second run reuses what is there), trains the offline analyst's
classifier (`manage.py train_analyst`: once, a no-op afterwards), then runs three child processes
side by side until Ctrl-C:

    web     manage.py runserver HOST:PORT --noreload
    worker  celery -A config worker --concurrency=1   (runs the tasks, in its own process)
    beat    celery -A config beat                     (periodic tasks; schedule file in var/)

Each child's output goes to this terminal with a prefix and to var/log/<name>.log. Ctrl-C or
SIGTERM stops them all and exits 0; so does the death of the process that started this one
(`make`, when only make's own process is killed); if one child dies on its own, the others are
stopped and this exits 1 naming it — except under `--serve`, where a worker or beat that dies is
started again (after 1, 2, 4 ... at most 30 s; back to 1 s once it has run for a minute) while the
web keeps serving; only the web's own death stops everything. Settings come from the environment like everywhere else
(DATABASE_URL, CELERY_BROKER_URL, ... see .env.example): the same script runs against PostgreSQL
and Redis. With HOST=0.0.0.0 (other machines) and DEBUG, ALLOWED_HOSTS defaults to "*".

`--serve` (`make serve`) is the production variant: no demo data and no migrations (it refuses to
start while migrations are unapplied), static files collected for WhiteNoise, and gunicorn
(WEB_CONCURRENCY workers) instead of runserver, beside the same Celery worker and beat. The
processes share PROMETHEUS_MULTIPROC_DIR (var/prometheus, emptied at start) so /metrics adds
them up."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE_SECONDS = 15
READY_TIMEOUT_SECONDS = 60
# `--serve`: a worker or beat that dies is restarted after RESTART_BACKOFF_SECONDS[n] for its n-th
# restart in a row (the last value repeats); a child that ran RESTART_RESET_SECONDS starts over.
RESTART_BACKOFF_SECONDS = (1, 2, 4, 8, 16, 30)
RESTART_RESET_SECONDS = 60
RESTARTABLE_UNDER_SERVE = ("worker", "beat")

try:  # loaded once, here: a child restarted while threads run must not load libraries after fork
    import ctypes

    _LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not Linux
    _LIBC = None


def log(message: str) -> None:
    print(f"[run] {message}", flush=True)


def prepare(*, serve: bool = False) -> dict:
    """Directories, migrations, demo data, static files. Returns what the banner needs. With
    `serve`: directories and static files only; unapplied migrations stop it (SystemExit)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    var_dir = Path(settings.VAR_DIR)
    log_dir = var_dir / "log"
    for directory in (var_dir, log_dir, Path(settings.EMAIL_FILE_PATH), Path(settings.MEDIA_ROOT),
                      Path(settings.CELERY_BROKER_DIR)):
        directory.mkdir(parents=True, exist_ok=True)

    log(f"database: {_safe_url(settings.DATABASE_URL)}")
    if serve:
        _refuse_unapplied_migrations()
        _say_if_analyst_untrained()
        call_command("collectstatic", interactive=False, verbosity=0)
        connections.close_all()
        return {"debug": settings.DEBUG, "log_dir": log_dir, "outbox": settings.EMAIL_FILE_PATH,
                "broker": _safe_url(settings.CELERY_BROKER_URL), "var_dir": var_dir}
    call_command("migrate", interactive=False, verbosity=1)
    log("demo data: manage.py seed_demo")
    call_command("seed_demo")
    # The offline analyst's classifier is trained here, once, not inside the first analysis (where a
    # step's time limit would cut it short); a no-op in a line when it is trained already.
    log("offline analyst: manage.py train_analyst")
    call_command("train_analyst")
    if not settings.DEBUG:
        # runserver serves static files itself only with DEBUG; otherwise collect them and let
        # `runserver --insecure` serve STATIC_ROOT (fine on a laptop, never in production).
        call_command("collectstatic", interactive=False, verbosity=0)
    connections.close_all()  # the children open their own connections

    from cases.management.commands.seed_demo import USERS, demo_password

    return {"debug": settings.DEBUG, "log_dir": log_dir, "outbox": settings.EMAIL_FILE_PATH,
            "broker": _safe_url(settings.CELERY_BROKER_URL), "users": USERS,
            "password_from_env": bool(os.environ.get("DEMO_PASSWORD")), "password": demo_password()}


def _refuse_unapplied_migrations() -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        log(f"{len(plan)} migration(s) not applied (first: {plan[0][0].app_label}.{plan[0][0].name}); "
            "run `.venv/bin/python manage.py migrate` first")
        raise SystemExit(2)


def _say_if_analyst_untrained() -> None:
    """Production trains the classifier as a deployment step, like migrate; say so if it was not.
    (The first analysis still works: it asks a worker to train it and waits.)"""
    from analyst.classifier import artifact_for, load_artifact

    artifact = artifact_for()
    if load_artifact(artifact) is None:
        log(f"the offline analyst is not trained yet (no {artifact.path}); run `manage.py train_analyst` "
            "before the first analysis, or a worker trains it when the first analysis asks")


def _die_with_launcher_parent() -> None:
    """If whatever started this launcher dies (make, killed alone: `kill <make's pid>`), Linux sends
    this launcher SIGTERM, and it stops its children like on Ctrl-C instead of leaving them running."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: nothing to do
        pass


def _safe_url(url: str) -> str:
    """A URL without its password, for printing."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        user = credentials.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in credentials else url
    return url


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_for_port(host: str, port: int, timeout: float, children: list[Child], stopping: threading.Event) -> bool:
    """True once the site answers HTTP on `port` (any status): an open port is not enough, the web
    process binds it before its workers have loaded the application (the model providers' code
    among it), and a banner printed then promised a site that did not answer yet."""
    deadline = time.monotonic() + timeout
    connect_host = "127.0.0.1" if host in ("0.0.0.0", "") else host.strip("[]")
    url = f"http://{connect_host if ':' not in connect_host else f'[{connect_host}]'}:{port}/healthz"
    while time.monotonic() < deadline:
        if stopping.is_set() or any(child.process.poll() is not None for child in children):
            return False
        try:
            with urllib.request.urlopen(url, timeout=max(1.0, min(10.0, deadline - time.monotonic()))):
                return True
        except urllib.error.HTTPError:  # an answer, whatever its status: the application is loaded
            return True
        except (OSError, TimeoutError):
            time.sleep(0.3)
    return False


def _die_with_parent() -> None:
    """Runs in the child before exec: if this launcher is killed outright (SIGKILL, no chance to
    clean up), Linux sends the child SIGTERM instead of leaving it running on its own. Only a C
    call on a library loaded before any fork: safe in a child forked while threads run."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Child:
    def __init__(self, name: str, argv: list[str], log_path: Path):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        env = os.environ | {"PYTHONUNBUFFERED": "1"}
        # Own session: a Ctrl-C in the terminal reaches only this launcher, which then stops the
        # children in order instead of all of them racing on the same SIGINT.
        self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                        bufsize=1, start_new_session=True, preexec_fn=_die_with_parent)
        self.thread: threading.Thread | None = None
        self.started_at = time.monotonic()

    def restarted(self) -> Child:
        """A new process with the same command and log (the old one has exited)."""
        if self.thread is not None:
            self.thread.join(timeout=2)  # the old output is forwarded to the end first
        child = Child(self.name, self.argv, self.log_path)
        child.start_forwarding()
        return child

    def start_forwarding(self) -> None:
        self.thread = threading.Thread(target=self._forward, name=f"forward-{self.name}", daemon=True)
        self.thread.start()

    def _forward(self) -> None:
        prefix = f"[{self.name:<6}] "
        with self.log_path.open("a", encoding="utf-8") as log_file:
            for line in self.process.stdout:
                log_file.write(line)
                log_file.flush()
                sys.stdout.write(prefix + line)
                sys.stdout.flush()

    def terminate(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.terminate()  # the main process only: celery's warm shutdown
            except ProcessLookupError:
                pass

    def kill_group(self) -> None:
        """SIGKILL whatever is left in the child's session (e.g. a celery pool process)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def stop_all(children: list[Child]) -> None:
    for child in children:
        child.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for child in children:
        remaining = max(0.1, deadline - time.monotonic())
        try:
            child.process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            log(f"{child.name} did not stop within {STOP_GRACE_SECONDS}s; killing it")
        child.kill_group()
        child.process.wait()
        if child.thread is not None:
            child.thread.join(timeout=2)


def supervise(children: list[Child], stopping: threading.Event, *, restartable: tuple[str, ...]) -> int:
    """Watch the children until a stop is asked (0) or one that may not be restarted dies (1).
    A dead child named in `restartable` is started again after a backoff; `children` is updated
    in place, so stop_all stops whichever process is current."""
    failures: dict[str, int] = {}
    restart_at: dict[str, float] = {}
    while not stopping.is_set():
        for index, child in enumerate(children):
            if child.process.poll() is None:
                if time.monotonic() - child.started_at >= RESTART_RESET_SECONDS:
                    failures.pop(child.name, None)
                continue
            if child.name not in restartable:
                log(f"{child.name} exited on its own with code {child.process.returncode}; stopping the others. "
                    f"Its log: {child.log_path}")
                return 1
            if child.name not in restart_at:
                count = failures.get(child.name, 0)
                delay = RESTART_BACKOFF_SECONDS[min(count, len(RESTART_BACKOFF_SECONDS) - 1)]
                failures[child.name] = count + 1
                restart_at[child.name] = time.monotonic() + delay
                log(f"{child.name} exited on its own with code {child.process.returncode}; restarting it in "
                    f"{delay}s (restart {count + 1} in a row); the others keep running. Its log: {child.log_path}")
            elif time.monotonic() >= restart_at[child.name]:
                del restart_at[child.name]
                children[index] = child.restarted()
                log(f"restarted {child.name} (pid {children[index].process.pid})")
        stopping.wait(0.5)
    return 0


def serve_banner(info: dict, url: str) -> None:
    print("\n".join(["", f"Arbiter (gunicorn) is serving at {url}",
                      f"  Celery worker + beat on {info['broker']}",
                      f"  Logs: {info['log_dir']}/{{web,worker,beat}}.log",
                      "  Stop with Ctrl-C or SIGTERM.", ""]), flush=True)


def banner(info: dict, url: str) -> None:
    users = info["users"]
    password = "the value of DEMO_PASSWORD" if info["password_from_env"] else info["password"]
    lines = [
        "",
        f"Arbiter is running at {url}",
        f"  Django admin (operations): {url}admin/",
        f"  Demo logins — password: {password}",
    ]
    for user in users:
        lines.append(f"    {user.username:<12} {user.tenant:<10} {user.role:<11} {user.what}")
    lines += [
        f"  Celery worker + beat on {info['broker']}",
        f"  Notices (emails) are written to {info['outbox']}",
        f"  Logs: {info['log_dir']}/{{web,worker,beat}}.log",
        "  Stop with Ctrl-C.",
        "",
    ]
    print("\n".join(lines), flush=True)


def _share_metrics_directory(var_dir: Path) -> None:
    """prometheus_client's multiprocess mode: every child writes its samples under one directory
    (emptied first: files of dead processes from an earlier start would be counted again)."""
    directory = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or var_dir / "prometheus")
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)


def main(argv: list[str] | None = None) -> int:
    serve = "--serve" in (sys.argv[1:] if argv is None else argv)
    os.chdir(ROOT)
    host = os.environ.get("HOST") or "127.0.0.1"
    port = int(os.environ.get("PORT") or "8000")
    target = "make serve" if serve else "make run"
    if not port_is_free(host, port):
        log(f"port {port} on {host} is already in use (another `{target}`?). "
            f"Stop it, or pick another port: {target} PORT={port + 1}")
        return 2
    parent = os.getppid()
    _die_with_launcher_parent()
    if os.getppid() != parent:  # it died before the line above took effect
        log("the process that started this one is gone; not starting")
        return 1
    if host in ("0.0.0.0", "::", "") and not os.environ.get("ALLOWED_HOSTS") and os.environ.get("DEBUG", "") in (
            "1", "true", "yes", "on"):
        # Other machines reach this one by a name or address settings cannot guess (DEBUG only).
        os.environ["ALLOWED_HOSTS"] = "*"
        log("HOST=0.0.0.0 with DEBUG: ALLOWED_HOSTS=* (set ALLOWED_HOSTS to restrict it)")

    try:
        info = prepare(serve=serve)
    except KeyboardInterrupt:
        log("interrupted while preparing; nothing was started")
        return 130
    except SystemExit as exc:
        return int(exc.code or 2)

    python = sys.executable
    celery = str(Path(python).with_name("celery"))
    if serve:
        _share_metrics_directory(info["var_dir"])
        web_argv = [str(Path(python).with_name("gunicorn")), "config.wsgi:application", "--bind", f"{host}:{port}",
                    "--workers", os.environ.get("WEB_CONCURRENCY") or "2",
                    "--timeout", os.environ.get("GUNICORN_TIMEOUT") or "60",
                    "--config", "config/gunicorn.conf.py", "--name", "arbiter-web"]
    else:
        web_argv = [python, "manage.py", "runserver", f"{host}:{port}", "--noreload"]
        if not info["debug"]:
            web_argv.append("--insecure")
    specs = [
        ("web", web_argv),
        ("worker", [celery, "-A", "config", "worker", "--loglevel=INFO", "--concurrency=1",
                    "--hostname=arbiter-local@%h"]),
        ("beat", [celery, "-A", "config", "beat", "--loglevel=INFO"]),
    ]

    stopping = threading.Event()

    def request_stop(signum, frame):
        if not stopping.is_set():
            log(f"got {signal.Signals(signum).name}; stopping web, worker and beat")
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    # Start every child before any thread exists (preexec_fn is unsafe once threads run).
    children = [Child(name, argv, info["log_dir"] / f"{name}.log") for name, argv in specs]
    for child in children:
        log(f"started {child.name} (pid {child.process.pid}): {' '.join(child.argv[1:])}")
        child.start_forwarding()

    url_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if wait_for_port(host, port, READY_TIMEOUT_SECONDS, children, stopping):
        (serve_banner if serve else banner)(info, f"http://{url_host}:{port}/")
    elif not stopping.is_set() and all(child.process.poll() is None for child in children):
        log(f"the web server did not answer on port {port} within {READY_TIMEOUT_SECONDS}s; see the log above")

    exit_code = supervise(children, stopping, restartable=RESTARTABLE_UNDER_SERVE if serve else ())
    stop_all(children)
    log("stopped" if exit_code == 0 else "stopped after a failure")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
