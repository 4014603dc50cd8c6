"""A step's commit in flight while the next step runs (ADR 0010, decision 10).

A worker that goes on with a run itself (runs.executor.run_steps, drive_inline) sends a steady-state
step's one-statement commit (runs.step_commit) and does not wait for it: it runs the next node,
computes that step's delta and builds its commit while PostgreSQL executes and flushes the first.
What the worker does in the meantime stays inside the process. Before anything leaves it — any
statement on its database connection, a transaction, closing the connection, a model call, a tool
call, the next commit — the commit in flight is confirmed: `StepPipeline.confirm()` reads its
result. So no effect of step N+1 is released before step N is durable, and at most one commit is
in flight per worker.

If that commit did not commit (refused because the run row or the audit head moved, or failed),
confirm() raises PipelineRefused. It is a BaseException, so a node's `except Exception` cannot
swallow it: it unwinds step N+1 (whose work was never released, and is discarded) up to run_step,
which calls its `settle()`: step N is committed the ordinary way — one transaction that tells a
lost lease, a cancellation and a moved row apart, exactly as when the one statement is refused
synchronously — and the next step starts again from the database.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, connections

logger = logging.getLogger(__name__)

_ACTIVE = threading.local()  # the pipeline with a commit in flight on this thread, if any


class PipelineRefused(BaseException):  # noqa: N818 — it is not an error of the code that sees it
    """The commit of an earlier step, sent without waiting, did not commit. `settle()` commits that
    step the ordinary way and returns its StepOutcome; the step being executed is abandoned."""

    def __init__(self, pending: PendingCommit, reason: str):
        super().__init__(f"run {pending.run_id} step {pending.sequence}: {reason}")
        self.pending = pending

    def settle(self):
        return self.pending.settle()


@dataclass
class PendingCommit:
    run_id: int
    sequence: int
    sent: object  # runs.step_sql.SentStepCommit
    on_refused: Callable[[], None]  # forget what was assumed of it (the audit head it advanced)
    settle: Callable[[], object]  # commits the step the ordinary way -> StepOutcome


class StepPipeline:
    """At most one step commit in flight on this thread's default database connection."""

    def __init__(self):
        self.db = connections[DEFAULT_DB_ALIAS]
        self.pending: PendingCommit | None = None
        self.sent = 0  # commits sent without waiting (for tests and the benchmark's report)

    # --- the commit in flight ------------------------------------------------------------------
    def send(self, pending: PendingCommit) -> None:
        """Hold `pending` (just sent) until confirmed; gate the connection meanwhile."""
        if self.pending is not None:  # the caller confirms first; never two in flight
            raise RuntimeError("a step commit is already in flight")
        self.pending = pending
        self.sent += 1
        self._gate()

    def confirm(self) -> None:
        """Wait for the commit in flight, if any. Raises PipelineRefused if it did not commit."""
        from runs.step_sql import StepCommitRefused

        pending = self.pending
        if pending is None:
            return
        self.pending = None
        self._ungate()
        try:
            pending.sent.result()
        except StepCommitRefused:
            pending.on_refused()
            logger.info("run %s step %s: one-statement commit refused; committing it the ordinary way",
                        pending.run_id, pending.sequence)
            raise PipelineRefused(pending, "the one-statement commit was refused") from None
        except Exception as exc:
            pending.on_refused()
            logger.warning("run %s step %s: the commit sent without waiting failed (%s); committing it the "
                           "ordinary way", pending.run_id, pending.sequence, exc)
            raise PipelineRefused(pending, f"the commit failed: {exc}") from exc

    def drain(self):
        """Confirm the commit in flight; if it did not commit, commit it the ordinary way. Returns
        the StepOutcome of that ordinary commit, or None (nothing in flight, or it committed)."""
        try:
            self.confirm()
        except PipelineRefused as refused:
            return refused.settle()
        return None

    # --- the gate: nothing leaves the process before the commit in flight is confirmed ----------
    def _gate(self) -> None:
        db = self.db
        # First in the list: the outermost wrapper, so no other wrapper sees a statement before the
        # commit in flight is confirmed; and Django's execute_wrapper() context managers, which pop
        # the last one on exit, still pop their own.
        db.execute_wrappers.insert(0, self._before_query)
        # Instance attributes shadow the backend's methods while a commit is in flight: opening a
        # transaction (Django's atomic sets autocommit off) or closing the connection confirms first.
        db._set_autocommit = self._before_set_autocommit
        db._close = self._before_close
        _ACTIVE.pipeline = self

    def _ungate(self) -> None:
        db = self.db
        try:
            db.execute_wrappers.remove(self._before_query)
        except ValueError:
            pass
        db.__dict__.pop("_set_autocommit", None)
        db.__dict__.pop("_close", None)
        if getattr(_ACTIVE, "pipeline", None) is self:
            _ACTIVE.pipeline = None

    def _before_query(self, execute, sql, params, many, context):
        self.confirm()
        return execute(sql, params, many, context)

    def _before_set_autocommit(self, autocommit):
        self.confirm()
        return type(self.db)._set_autocommit(self.db, autocommit)

    def _before_close(self):
        self.confirm()
        return type(self.db)._close(self.db)


def confirm_in_flight() -> None:
    """Confirm this thread's commit in flight, if any (before a model or tool call leaves the
    process). Raises PipelineRefused if it did not commit."""
    pipeline = getattr(_ACTIVE, "pipeline", None)
    if pipeline is not None:
        pipeline.confirm()
