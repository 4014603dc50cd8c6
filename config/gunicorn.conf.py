"""gunicorn settings for `make serve`: its own log lines go through the same structured
formatter as Django's (ops/logging.py). Everything else is on the command line (scripts/run_local.py)."""

import os
from pathlib import Path

from ops.logging import logging_config

_debug = os.environ.get("DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
logconfig_dict = logging_config(level=os.environ.get("LOG_LEVEL") or "INFO",
                                fmt=os.environ.get("LOG_FORMAT") or ("console" if _debug else "json"))
# One line per request is written by ops.middleware.RequestContextMiddleware, with the request id.
accesslog = None
# gunicorn 27's control socket defaults to ~/.gunicorn/gunicorn.ctl: one path for every instance of
# the same user on the host, so a second instance takes over (or breaks) the first one's. Each
# instance gets its own, in its var/ folder (ARBITER_VAR_DIR), unless GUNICORN_CONTROL_SOCKET says
# otherwise. A Unix socket path is limited to ~107 bytes: a longer one is refused loudly.
_var_dir = Path(os.environ.get("ARBITER_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET") or str(_var_dir / "gunicorn.ctl")
if len(control_socket.encode()) > 107:
    raise SystemExit(f"gunicorn control socket path too long for a Unix socket ({control_socket}); "
                     f"set GUNICORN_CONTROL_SOCKET to a shorter path")

# A request spends much of its time waiting for PostgreSQL (and a login for its password hash):
# threads let a worker process serve other requests meanwhile, without a process per request's
# memory. WEB_CONCURRENCY processes (default 2: one per core here) × GUNICORN_THREADS threads
# (default 4); measured with bench/load.py (bench/RESULTS.md). Each thread keeps its own
# database connection (DB_CONN_MAX_AGE), so PostgreSQL sees at most processes × threads of them.
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY") or 2)
threads = int(os.environ.get("GUNICORN_THREADS") or 4)
# A kept-alive connection idle this long is closed. Longer than a person's pause between two
# clicks of one page's requests, so a browser (or a proxy) reusing it does not meet a connection
# the server is closing at that very moment (a reset, seen in bench/load.py at gunicorn's 2 s).
keepalive = 5
