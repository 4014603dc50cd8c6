"""Listeners called by audit_record, inside the transaction of the change it records.

The audit app imports nothing of ours (it is the lowest layer, docs/architecture.md); apps above it register a listener from their
AppConfig.ready (integrations turns audit events into webhook events and its feed, ADR 0009).
A listener must only write rows in the current transaction (never call out): if it raises, the
change rolls back with it, as any other failure inside the transaction would."""

from __future__ import annotations

from collections.abc import Callable

_after_record: list[tuple[Callable, Callable | None]] = []
# listener -> the same listener for a list of events (one call for a bulk writer's whole batch).
_after_record_many: dict[Callable, Callable] = {}


def register_after_record(listener: Callable, *, interested_in: Callable[[str], bool] | None = None,
                          many: Callable | None = None) -> None:
    """`interested_in(action)`, if given, says which actions the listener acts on (it is still
    called for every event): a writer may then append an event nobody listens to without a
    transaction around it (the executor's one-statement step commit, ADR 0010). `many(events)`, if
    given, does what calling the listener on each event in order does, for audit_record_many."""
    if all(registered is not listener for registered, _ in _after_record):
        _after_record.append((listener, interested_in))
    if many is not None:
        _after_record_many[listener] = many


def has_listener_for(action: str) -> bool:
    """Whether any listener may act on an event with this action."""
    return any(interested_in is None or interested_in(action) for _, interested_in in _after_record)


def run_after_record(event) -> None:
    for listener, _ in _after_record:
        listener(event)


def run_after_record_many(events: list) -> None:
    for listener, _ in _after_record:
        many = _after_record_many.get(listener)
        if many is not None:
            many(events)
        else:
            for event in events:
                listener(event)
