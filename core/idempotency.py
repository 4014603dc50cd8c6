"""What the API base view (core.api_base) needs of an Idempotency-Key store, and the slot the store
fills. The records are a table of integrations (integrations.idempotency), which fills the slot in
IntegrationsConfig.ready(); this module is kept light (no DRF) so that doing so imports nothing more
than it needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.slots import Slot


class IdempotentReplay(Exception):
    """Raised by the idempotency begin function to answer with the stored response
    (ApiView.handle_exception)."""

    def __init__(self, response: Any):
        super().__init__("replay")
        self.response = response


@dataclass(frozen=True)
class Idempotency:
    """What ApiView calls for an unsafe request: `begin(request)` claims the key (a record, None
    without a key, or raises IdempotentReplay / a 409 / a 422), `complete(record, response)` keeps the
    answer to replay, `abandon(record)` forgets a claim whose request failed."""

    begin: Callable[[Any], object | None]
    complete: Callable[[object, Any], None]
    abandon: Callable[[object], None]


# Filled by IntegrationsConfig.ready() with integrations.idempotency's functions.
IDEMPOTENCY: Slot[Idempotency] = Slot("the Idempotency-Key store (integrations.idempotency)")
