"""The process-local cache of run states between a worker's own steps (ADR 0010)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings

from runs.models import AgentRun
from runs.state import Chain, RunState, StateDigest


@dataclass
class CachedState:
    """What this process committed last for a run: the state object, its digests and chain, and the
    run row's version after that commit (a different version means someone else wrote the row)."""

    sequence: int
    state_hash: str
    state: RunState
    digest: StateDigest
    chain: Chain
    run_version: int


class StateCache:
    """Process-local LRU of run states, keyed by run id and checked against the run row's
    (state_sequence, state_hash): a worker that executes consecutive steps of a run reloads
    nothing; any other writer makes the entry miss (and it is reloaded from the checkpoints)."""

    def __init__(self):
        self._entries: OrderedDict[int, CachedState] = OrderedDict()

    def get(self, run: AgentRun) -> CachedState | None:
        entry = self._entries.get(run.pk)
        if entry is None or entry.sequence != run.state_sequence or entry.state_hash != run.state_hash:
            return None
        self._entries.move_to_end(run.pk)
        return entry

    def put(self, run_id: int, entry: CachedState) -> None:
        size = settings.ARBITER_RUN_STATE_CACHE_SIZE
        if size <= 0:
            return
        self._entries[run_id] = entry
        self._entries.move_to_end(run_id)
        while len(self._entries) > size:
            self._entries.popitem(last=False)

    def drop(self, run_id: int) -> None:
        self._entries.pop(run_id, None)

    def clear(self) -> None:
        self._entries.clear()


STATE_CACHE = StateCache()


