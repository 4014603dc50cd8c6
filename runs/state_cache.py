"""The process-local cache of run states between a worker's own steps (ADR 0010)."""

from __future__ import annotations

import time
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
    # Set when this worker's commit kept the lease: the run row as that commit left it, who holds
    # the lease and when (time.monotonic()) it committed — what lets the next step skip reading it.
    run: AgentRun | None = None
    worker_id: str = ""
    committed_at: float = 0.0


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

    def own_run(self, run_id: int, worker_id: str, max_age_seconds: float) -> CachedState | None:
        """The entry of a run whose lease `worker_id` kept at its own commit less than
        `max_age_seconds` ago: its run object is the row as that commit wrote it, and the next
        commit re-checks (lease, sequence, no cancel, same version) that nobody wrote it since."""
        entry = self._entries.get(run_id)
        if entry is None or entry.run is None or entry.worker_id != worker_id:
            return None
        if time.monotonic() - entry.committed_at >= max_age_seconds:
            return None
        self._entries.move_to_end(run_id)
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


