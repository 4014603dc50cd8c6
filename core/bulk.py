"""Many new rows of one model written fast: COPY on PostgreSQL, bulk_create elsewhere.

Django's bulk_create on PostgreSQL sends each column as an array (INSERT ... SELECT UNNEST(...));
psycopg writes text arrays in Python, escaping every element with a regular expression, and a
plain multi-row INSERT makes it parse a statement of tens of thousands of placeholders: for long
texts (narratives, JSON payloads) either cost more than the database's work. COPY streams the rows
through psycopg's C dumpers instead. COPY returns no ids, so the ids are taken from the table's
sequence first (one statement) and written with the rows. Same rows as bulk_create: field defaults
and auto_now values filled by pre_save, the primary keys set on the objects."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, connections


def insert_rows(objs: Sequence, *, using: str = DEFAULT_DB_ALIAS) -> None:
    """INSERT `objs` (new instances of one model, with an auto-incremented primary key) and set
    their primary keys (those reserved with reserve_ids are kept). Objects they refer to must be saved before they are built (their foreign
    key columns are read as they are)."""
    if not objs:
        return
    connection = connections[using]  # the connection itself, not the thread-local proxy: read per value
    model = type(objs[0])
    if connection.vendor != "postgresql":
        model.objects.using(using).bulk_create(objs)
        return
    meta = model._meta
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    table, pk_column = meta.db_table, meta.pk.column
    if any(obj.pk is None for obj in objs):
        reserve_ids(objs, using=using)
    ids = [obj.pk for obj in objs]
    with connection.cursor() as cursor:
        columns = ", ".join(connection.ops.quote_name(name) for name in [pk_column, *(f.column for f in fields)])
        readers = [_reader(field, connection) for field in fields]
        with cursor.cursor.copy(f"COPY {connection.ops.quote_name(table)} ({columns}) FROM STDIN") as copy:
            for obj, pk in zip(objs, ids, strict=True):
                copy.write_row([pk, *(read(obj) for read in readers)])
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = using


# Field types whose value psycopg takes as it is (get_db_prep_save would return it unchanged on
# PostgreSQL): reading the attribute skips Django's per-value preparation, most of the cost of a row.
_AS_IS = frozenset({"CharField", "TextField", "EmailField", "SlugField", "IntegerField", "BigIntegerField",
                    "PositiveIntegerField", "PositiveBigIntegerField", "PositiveSmallIntegerField",
                    "SmallIntegerField", "BooleanField", "DateField", "DateTimeField", "ForeignKey"})


def _reader(field, connection):
    """A function giving the value of `field` to write for an object, as bulk_create would."""
    internal = field.get_internal_type()
    if internal in _AS_IS and not getattr(field, "auto_now", False) and not getattr(field, "auto_now_add", False):
        attname = field.attname
        return lambda obj: getattr(obj, attname)
    return lambda obj: field.get_db_prep_save(field.pre_save(obj, add=True), connection)


def reserve_ids(objs: Sequence, *, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Give new `objs` (of one model) their primary keys from the table's sequence now, before they
    are inserted, so rows that refer to them can be built first: PostgreSQL only (True); elsewhere
    nothing is done (False) and the ids come with the insert."""
    connection = connections[using]
    if not objs or connection.vendor != "postgresql":
        return False
    meta = type(objs[0])._meta
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                       [meta.db_table, meta.pk.column, len(objs)])
        for obj, (pk,) in zip(objs, cursor.fetchall(), strict=True):
            obj.pk = pk
    return True
