"""Append-only list fields of a run's state, whose stored items load only when read (ADR 0010).

A run's `notes` and `completed_steps` only ever grow: a step appends to them. After 1,000 steps
they are most of the state (the step benchmark's graph appends ~500 bytes per step), yet neither
the executor resuming a run nor a page showing its phase and plan reads them. So `state_at` leaves
the items that the checkpoint chain's compactions hold in the database and gives the state an
`AppendLog` that knows how many there are and how to fetch them: its first read of such an item
fetches them all in one query. What is cheap stays cheap without a fetch: the length, the items
appended since the last compaction (the chain's deltas, loaded with the state), the items this
process appends, and the list's structural digest (each compaction records it).

`AppendLog` is deliberately not a `list` subclass: C code (json, pydantic-core) reads a list's
storage directly and would see an empty list. It is a `Sequence` with `append`/`extend` and no way
to change or remove an item, so "append-only" is a property of the type. A plain list assigned to
such a field replaces it (recorded as a `set` in the step's delta).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, TypeAdapter


class CheckpointChanged(LookupError):
    """The stored items an AppendLog was loaded to fetch are no longer there as they were (the run's
    checkpoints were purged or rewritten since): load the state again."""


class AppendLog(Sequence):
    """An append-only sequence: `prefix_len` stored items (fetched by `loader` on first need, or
    given), then `tail` items held in memory. `prefix_chain`, when known, is the structural digest
    (runs.state) of the prefix in its JSON form, so the state hash needs no fetch."""

    __slots__ = ("_prefix", "_prefix_len", "_tail", "_loader", "prefix_chain")

    def __init__(self, items: Iterable = (), *, prefix_len: int = 0, loader: Callable[[], list] | None = None,
                 prefix_chain: bytes | None = None):
        self._tail = list(items)
        self._prefix: list | None = [] if loader is None else None
        self._prefix_len = prefix_len if loader is not None else 0
        self._loader = loader
        self.prefix_chain = prefix_chain if loader is not None else None

    @property
    def loaded(self) -> bool:
        """Whether every item is in memory (nothing left to fetch)."""
        return self._prefix is not None

    @property
    def pending_count(self) -> int:
        """How many items are still in the database."""
        return 0 if self._prefix is not None else self._prefix_len

    def _load(self) -> list:
        if self._prefix is None:
            items = self._loader()
            if len(items) != self._prefix_len:
                raise CheckpointChanged(f"The run's stored state changed while it was read ({len(items)} items "
                                        f"found, {self._prefix_len} expected); load it again.")
            self._prefix, self._loader = items, None
        return self._prefix

    def as_list(self) -> list:
        """Every item, in order (fetches the stored ones if need be)."""
        return self._load() + self._tail

    def since(self, index: int) -> list:
        """The items from position `index` on; no fetch when they were all appended in memory."""
        if index >= self._prefix_len:
            return self._tail[index - self._prefix_len:]
        return self.as_list()[index:]

    def tail_after_prefix(self) -> list:
        """The items after the stored prefix (what `prefix_chain` does not cover)."""
        return self._tail

    def append(self, item: Any) -> None:
        self._tail.append(item)

    def extend(self, items: Iterable) -> None:
        self._tail.extend(items)

    def __len__(self) -> int:
        return self._prefix_len + len(self._tail)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1 and start >= self._prefix_len:
                return self._tail[start - self._prefix_len:max(start, stop) - self._prefix_len]
            return self.as_list()[index]
        position = index + len(self) if index < 0 else index
        if position < 0 or position >= len(self):
            raise IndexError("AppendLog index out of range")
        if position >= self._prefix_len:
            return self._tail[position - self._prefix_len]
        return self._load()[position]

    def __iter__(self) -> Iterator:
        yield from self._load()
        yield from self._tail

    def __eq__(self, other) -> bool:
        if isinstance(other, AppendLog):
            return len(self) == len(other) and self.as_list() == other.as_list()
        if isinstance(other, list):
            return len(self) == len(other) and self.as_list() == other
        return NotImplemented

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        if self._prefix is None:
            return f"AppendLog({self._prefix_len} stored items not loaded + {self._tail!r})"
        return f"AppendLog({self.as_list()!r})"

    def __copy__(self) -> AppendLog:
        return AppendLog(self.as_list())

    def __deepcopy__(self, memo) -> AppendLog:
        import copy

        return AppendLog(copy.deepcopy(self.as_list(), memo))


class LazyItems:
    """What the checkpoint loader hands RunState validation for an append-only field: raw (JSON)
    items in memory — `prefix` (from a snapshot or a set) and `tail` (from the deltas) — plus
    `stored` item counts left in the database, fetched by `fetch()` (raw items, in order) when read,
    and the digest of everything before the tail when a compaction recorded it."""

    __slots__ = ("prefix", "stored", "fetch", "tail", "chain")

    def __init__(self, prefix: list, stored: int, fetch: Callable[[], list] | None, tail: list,
                 chain: bytes | None):
        self.prefix, self.stored, self.fetch, self.tail, self.chain = prefix, stored, fetch, tail, chain


def append_log_of(item_type) -> Any:
    """The annotation of an append-only state field whose items are `item_type`: validated from a
    list (or a LazyItems from the checkpoint loader, whose stored items are validated when fetched),
    serialised as a list."""
    items = TypeAdapter(list[item_type])

    def validate(value):
        if isinstance(value, AppendLog):
            return value
        if isinstance(value, LazyItems):
            if not value.stored:
                return AppendLog(items.validate_python(value.prefix + value.tail))
            prefix, fetch = value.prefix, value.fetch
            return AppendLog(items.validate_python(value.tail), prefix_len=len(prefix) + value.stored,
                             loader=lambda: items.validate_python(prefix + fetch()), prefix_chain=value.chain)
        if isinstance(value, (list, tuple)):
            return AppendLog(items.validate_python(value))
        raise ValueError("must be a list")

    def serialise(value):  # a list of the items, which pydantic then serialises as list[item_type]
        return value.as_list() if isinstance(value, AppendLog) else value

    return Annotated[AppendLog, PlainValidator(validate, json_schema_input_type=list[item_type]),
                     PlainSerializer(serialise, return_type=list[item_type])]


def append_only_fields(model) -> tuple[str, ...]:
    """The names of `model`'s AppendLog fields."""
    return tuple(name for name, info in model.model_fields.items() if info.annotation is AppendLog)
