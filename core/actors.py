"""Who acts. A person is a user; an agent is an actor with a name and a version and never a user
with permissions; the system is the platform itself (reapers, retention jobs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Actor:
    kind: str  # "user" | "agent" | "system"
    name: str
    version: str = ""
    user: Any = None  # the accounts.User for kind == "user"

    USER = "user"
    AGENT = "agent"
    SYSTEM = "system"

    @classmethod
    def for_user(cls, user) -> Actor:
        return cls(kind=cls.USER, name=user.username, user=user)

    @classmethod
    def agent(cls, name: str, version: str) -> Actor:
        return cls(kind=cls.AGENT, name=name, version=version)

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls(kind=cls.SYSTEM, name=name)

    @property
    def is_user(self) -> bool:
        return self.kind == self.USER and self.user is not None

    @property
    def is_agent(self) -> bool:
        return self.kind == self.AGENT

    @property
    def identifier(self) -> str:
        """Stable id recorded on rows and audit events: user:<pk>, agent:<name>@<version>, system:<name>."""
        if self.kind == self.USER:
            return f"user:{self.user.pk}"
        if self.kind == self.AGENT:
            return f"agent:{self.name}@{self.version}"
        return f"system:{self.name}"

    @property
    def role(self) -> str | None:
        return getattr(self.user, "role", None) if self.is_user else None

    def __str__(self) -> str:
        return self.identifier


def coerce_actor(actor_or_user) -> Actor:
    """Accept an Actor or a user; services take either for convenience at the edges."""
    if isinstance(actor_or_user, Actor):
        return actor_or_user
    if actor_or_user is not None and hasattr(actor_or_user, "is_authenticated"):
        return Actor.for_user(actor_or_user)
    raise TypeError(f"Not an actor: {actor_or_user!r}")
