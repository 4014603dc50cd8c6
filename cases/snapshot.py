"""The case as an agent sees it (its context and the case_read tool): plain JSON values."""

from __future__ import annotations

CASE_FIELDS = ("reference", "title", "status", "risk_level", "version", "product", "sub_product", "issue",
               "sub_issue", "company", "consumer_state", "tags", "received_at")


def case_snapshot(case) -> dict | None:
    if case is None:
        return None
    data = {name: getattr(case, name) for name in CASE_FIELDS}
    data["received_at"] = case.received_at.isoformat() if case.received_at else None
    return data
