"""Structured logs (structlog), the same in the web process and the Celery worker.

Every log line, from structlog's loggers and from the standard library's (Django, Celery, the
apps' `logging.getLogger(__name__)`), goes through one formatter that adds the ids bound in
`structlog.contextvars` for the current request or task: request_id, user_id, tenant_id,
case_ref/case_id, run_id, step. ops.middleware binds them for a request, ops.celery_signals for a
task. LOG_FORMAT=json renders one JSON object per line (production); console renders the same
keys readably (the default with DEBUG).

This module is imported by the settings (config/settings/operations.py): it must not import Django models."""

from __future__ import annotations

import structlog

LOG_FORMATS = ("json", "console")


def _shared_processors() -> list:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _renderer(fmt: str):
    if fmt == "json":
        return structlog.processors.JSONRenderer(default=str, sort_keys=False)
    return structlog.dev.ConsoleRenderer(colors=False, sort_keys=False)


def formatter_config(fmt: str) -> dict:
    """A logging.config formatter entry rendering stdlib and structlog records alike."""
    return {
        "()": structlog.stdlib.ProcessorFormatter,
        "foreign_pre_chain": _shared_processors() + [structlog.stdlib.ExtraAdder()],
        "processors": [
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _renderer(fmt),
        ],
    }


def logging_config(*, level: str, fmt: str) -> dict:
    """The LOGGING dict of the settings (config/settings/operations.py)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"structured": formatter_config(fmt)},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "WARNING"},
                    # gunicorn (make serve, config/gunicorn.conf.py): its lifecycle lines, formatted alike.
                    "gunicorn.error": {"level": level, "propagate": True},
                    "gunicorn.access": {"level": "WARNING", "propagate": True},
                    # django-axes reports every login at INFO; lockouts (WARNING) and the audit suffice.
                    "axes": {"level": "WARNING"},
                    # One line per request is written by ops.middleware with the ids; the server's own
                    # access line would repeat it without them.
                    "django.server": {"level": "WARNING"}},
    }


def configure_structlog() -> None:
    """structlog's own loggers hand their events to the standard library (and so to the formatter
    above). Idempotent."""
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def get_logger(name: str):
    return structlog.stdlib.get_logger(name)


def bind(**ids) -> None:
    """Bind ids to the current context (None values are skipped). Whoever binds for a request or a
    task restores the context it found at its end (ops.middleware, ops.celery_signals)."""
    structlog.contextvars.bind_contextvars(**{k: v for k, v in ids.items() if v is not None})


