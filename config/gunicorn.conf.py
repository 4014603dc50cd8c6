"""gunicorn settings for `make serve`: its own log lines go through the same structured
formatter as Django's (ops/logging.py). Everything else is on the command line (scripts/run_local.py)."""

import os

from ops.logging import logging_config

_debug = os.environ.get("DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
logconfig_dict = logging_config(level=os.environ.get("LOG_LEVEL") or "INFO",
                                fmt=os.environ.get("LOG_FORMAT") or ("console" if _debug else "json"))
# One line per request is written by ops.middleware.RequestContextMiddleware, with the request id.
accesslog = None
