"""The database cache, with an atomic increment: the cache of deployments without Redis.

Django's DatabaseCache increments with a read and a separate write, so two processes incrementing
the same counter at once can both write the same value and lose a count; a rate limit counted that
way admits more than its limit. Here the read and the write happen in one transaction holding the
row: SELECT ... FOR UPDATE on PostgreSQL; on SQLite the settings open every transaction with BEGIN
IMMEDIATE, which takes the database's write lock before the read. The table is created by this
app's migration (`manage.py migrate`), so there is no separate `createcachetable` step."""

from __future__ import annotations

import base64
import pickle

from django.core.cache.backends.db import DatabaseCache
from django.db import connections, router, transaction
from django.utils import timezone


class AtomicDatabaseCache(DatabaseCache):
    def incr(self, key, delta=1, version=None):
        key = self.make_and_validate_key(key, version=version)
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        quote = connection.ops.quote_name
        table, cache_key, value_column, expires = (quote(self._table), quote("cache_key"), quote("value"),
                                                   quote("expires"))
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        now = connection.ops.adapt_datetimefield_value(timezone.now().replace(microsecond=0))
        with transaction.atomic(using=db), connection.cursor() as cursor:
            cursor.execute(f"SELECT {value_column} FROM {table} WHERE {cache_key} = %s AND {expires} >= %s{lock}",
                           [key, now])
            row = cursor.fetchone()
            if row is None:
                raise ValueError(f"Key '{key}' not found.")
            stored = connection.ops.process_clob(row[0])
            value = pickle.loads(base64.b64decode(stored.encode())) + delta
            encoded = base64.b64encode(pickle.dumps(value, self.pickle_protocol)).decode("latin1")
            cursor.execute(f"UPDATE {table} SET {value_column} = %s WHERE {cache_key} = %s", [encoded, key])
        return value
