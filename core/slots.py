"""A slot: one object a lower module needs from an app above it, filled in that app's
AppConfig.ready() (dependency inversion, so neither module imports the other inside a function).

The typical case is a Celery task: an app's tasks.py sits at the top of the app (each task calls a
service), so a service that queues one of those tasks after its commit cannot import tasks.py
without closing an import cycle. The service declares a Slot; the app's ready() fills it."""

from __future__ import annotations

from typing import Generic, TypeVar

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")


class Slot(Generic[T]):
    def __init__(self, what: str):
        self.what = what
        self._value: T | None = None

    def fill(self, value: T) -> None:
        self._value = value

    def get(self) -> T:
        if self._value is None:
            raise ImproperlyConfigured(f"Nothing registered for {self.what}: is its app in INSTALLED_APPS?")
        return self._value
