"""Readable names for the actor identifiers recorded on rows and events (user:<pk>,
agent:<name>@<version>, system:<name>)."""

from __future__ import annotations

from collections.abc import Iterable

from accounts.selectors import user_list_for_tenant, usernames_for_tenant
from web.labels import actor_fallback


def actor_labels(*, tenant_id: int, identifiers: Iterable[str],
                 usernames: dict[int, str] | None = None) -> dict[str, str]:
    """Map each identifier to a label. User ids are resolved from `usernames` when the caller has
    them, else with one query limited to this tenant (a user of another tenant never appears on
    this tenant's rows; if one did, it would read as a former member of staff, never as an id)."""
    identifiers = {i for i in identifiers if i}
    if usernames is None:
        user_ids = {int(i.split(":", 1)[1]) for i in identifiers
                    if i.startswith("user:") and i.split(":", 1)[1].isdigit()}
        usernames = usernames_for_tenant(tenant_id=tenant_id, user_ids=user_ids)
    users = usernames
    labels = {}
    for identifier in identifiers:
        kind, _, rest = identifier.partition(":")
        if kind == "user" and rest.isdigit() and int(rest) in users:
            labels[identifier] = users[int(rest)]
        elif kind == "agent":
            name, _, version = rest.partition("@")
            labels[identifier] = f"{name} {version}".strip()
        elif kind == "system":
            labels[identifier] = rest
        else:  # a person no longer in this tenant, or an unknown kind: words, never the raw id
            labels[identifier] = actor_fallback(identifier)
    return labels


def tenant_users(*, tenant_id: int):
    """Active people of the tenant, for the assignee choice of an assignment proposal."""
    return user_list_for_tenant(tenant_id=tenant_id)
