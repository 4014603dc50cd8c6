"""Celery side of operations: the same structured logs as the web, with the ids of the task's
run, step, case and tenant, the request id of the web request that enqueued it, and the metrics
that are visible at the task boundary.

Imported by config/celery.py (so it is connected in the worker and beat before they set up
logging); importing it does not touch Django models."""

from __future__ import annotations

import logging
import logging.config
import time
from collections.abc import Callable

import structlog
from celery import signals

from ops import metrics
from ops.logging import get_logger

logger = get_logger("arbiter.task")

REQUEST_ID_HEADER = "arbiter_request_id"
RUN_STEP_TASK = "runs.tasks.run_step_task"
REAP_TASK = "runs.tasks.reap_expired_leases_task"
DISPATCH_TASK = "cases.tasks.notice_dispatch_task"

# Per task id: the context before the task bound its ids, and what the metrics need at postrun.
_RUNNING: dict[str, dict] = {}


@signals.setup_logging.connect(weak=False)
def _use_django_logging(**kwargs) -> None:
    """A receiver here stops Celery from installing its own log format: the worker and beat log
    through Django's LOGGING (ops.logging), like the web."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@signals.before_task_publish.connect(weak=False)
def _carry_request_id(headers=None, **kwargs) -> None:
    request_id = structlog.contextvars.get_contextvars().get("request_id")
    if request_id and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


# What the apps above ops tell about their tasks, registered from their AppConfig.ready(): the ids
# a run_id names (for the log context and for metrics at postrun), and what a run step's return
# value means for the run metrics. Registered, not imported, so ops stays below the run engine.
_RUN_LOOKUP: list[Callable[[int], dict]] = []
_RUN_STEP_OBSERVER: list[Callable[[dict, str], None]] = []


def register_run_lookup(lookup: Callable[[int], dict]) -> None:
    """`lookup(run_id)` → {"run_id", "tenant_id", "case_id", "step", "graph", "status_before"}."""
    _RUN_LOOKUP[:] = [lookup]


def register_run_step_observer(observer: Callable[[dict, str], None]) -> None:
    """`observer(info, retval)` after a run step task: `info` is what the lookup returned at prerun."""
    _RUN_STEP_OBSERVER[:] = [observer]


def _run_ids(run_id) -> dict:
    if not _RUN_LOOKUP:
        return {"run_id": int(run_id)}
    return _RUN_LOOKUP[0](int(run_id))


@signals.task_prerun.connect(weak=False)
def _bind_task_context(task_id=None, task=None, kwargs=None, **_) -> None:
    kwargs = kwargs or {}
    ids: dict = {"task": task.name, "task_id": task_id}
    request_id = None
    if task is not None:
        # Custom headers of a published task show up on the request (protocol 2) or in its headers.
        request_id = (getattr(task.request, REQUEST_ID_HEADER, None)
                      or (getattr(task.request, "headers", None) or {}).get(REQUEST_ID_HEADER))
    if request_id:
        ids["request_id"] = request_id
    info: dict = {}
    if kwargs.get("run_id") is not None:
        try:
            info = _run_ids(kwargs["run_id"])
        except Exception:  # the ids are for logs only; never fail a task over them
            logging.getLogger(__name__).exception("could not read the ids of run %s", kwargs["run_id"])
            info = {}
        ids.update({k: info[k] for k in ("run_id", "tenant_id", "case_id", "step") if k in info})
    if kwargs.get("notice_id") is not None:
        ids["notice_id"] = kwargs["notice_id"]
    _RUNNING[task_id] = {"outer": structlog.contextvars.get_contextvars(), "started": time.monotonic(),
                         "info": info}
    structlog.contextvars.bind_contextvars(**ids)
    logger.info("task.started")


@signals.task_postrun.connect(weak=False)
def _unbind_task_context(task_id=None, task=None, retval=None, state=None, **_) -> None:
    entry = _RUNNING.pop(task_id, None)
    try:
        if entry is not None and task is not None:
            _observe(task.name, entry, retval)
        logger.info("task.finished", state=state)
    finally:
        if entry is not None:
            structlog.contextvars.clear_contextvars()
            structlog.contextvars.bind_contextvars(**entry["outer"])


def _observe(name: str, entry: dict, retval) -> None:
    if name == RUN_STEP_TASK and isinstance(retval, str):
        for observer in _RUN_STEP_OBSERVER:
            observer(entry["info"], retval)
    elif name == REAP_TASK and isinstance(retval, int):
        metrics.leases_expired(retval)
    elif name == DISPATCH_TASK and isinstance(retval, str):
        metrics.dispatch(outcome=retval)
