"""What the cases app's models share: a refresh that is safe beside concurrent transitions, and rows
written once."""

from __future__ import annotations

from django.db import models
from django_fsm import FSMFieldMixin


class ThreadSafeRefreshMixin:
    """refresh_from_db for models with protected FSM fields, safe under threads.

    django-fsm-2 lets refresh_from_db write a protected field by setting `protected = False` on the
    *field* — shared by every instance in every thread — and back to True afterwards. Two threads
    refreshing at once re-protect the field under each other (AttributeError in the middle of a
    service, which rolls the whole change back), and while one of them has it lifted, any thread
    may assign the status directly. The descriptor only refuses a value already in the instance's
    __dict__, so this reload takes the protected values out of this one instance and lets Django
    set them again: protection is never lifted for anybody else."""

    def refresh_from_db(self, using=None, fields=None, from_queryset=None):
        reload_all = fields is None
        if reload_all:
            # Name the loaded fields explicitly: once popped below, Django would take the protected
            # ones for deferred fields and skip them.
            deferred = self.get_deferred_fields()
            fields = [f.attname for f in self._meta.concrete_fields if f.attname not in deferred]
        requested = set(fields)
        protected = [f.attname for f in self._meta.concrete_fields if isinstance(f, FSMFieldMixin) and f.protected]
        # All of them, not only the requested ones: ConcurrentTransitionMixin.__init__ reads the state
        # fields, so the row Django reloads from always carries them and Django copies them over.
        held = {name: self.__dict__.pop(name) for name in protected if name in self.__dict__}
        try:
            models.Model.refresh_from_db(self, using=using, fields=fields, from_queryset=from_queryset)
        except BaseException:
            self.__dict__.update(held)
            raise
        for name, value in held.items():
            if name not in requested or name not in self.__dict__:
                self.__dict__[name] = value  # not asked for: keep the value this instance had
        if reload_all:  # what Django does itself when no fields are named
            self._prefetched_objects_cache = {}
            for relation in self._meta.related_objects:
                if relation.is_cached(self):
                    relation.delete_cached_value(self)
        self._update_initial_state()  # ConcurrentTransitionMixin: the reloaded states are the new baseline


class ImmutableModel(models.Model):
    """Rows written once. Updates through the ORM are refused; corrections are new rows."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValueError(f"{type(self).__name__} rows are immutable once written.")
        super().save(*args, **kwargs)
