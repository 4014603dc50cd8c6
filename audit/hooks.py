"""Listeners called by audit_record, inside the transaction of the change it records.

The audit app imports nothing of ours (it is the lowest layer, docs/architecture.md); apps above it register a listener from their
AppConfig.ready (integrations turns audit events into webhook events and its feed, ADR 0009).
A listener must only write rows in the current transaction (never call out): if it raises, the
change rolls back with it, as any other failure inside the transaction would."""

from __future__ import annotations

from collections.abc import Callable

_after_record: list[Callable] = []


def register_after_record(listener: Callable) -> None:
    """Call `listener(event)` after every audit event, in the event's transaction (once per listener)."""
    if all(registered is not listener for registered in _after_record):
        _after_record.append(listener)


def run_after_record(event) -> None:
    for listener in _after_record:
        listener(event)
