"""The database cache's table (ops.cache.AtomicDatabaseCache, named in settings.CACHES), created by
`migrate` whatever CACHES says today, so switching from Redis to the database later needs no step."""

from django.core.management.commands.createcachetable import Command as CreateCacheTable
from django.db import migrations

TABLE = "arbiter_cache"


def create(apps, schema_editor):
    alias = schema_editor.connection.alias
    if TABLE not in schema_editor.connection.introspection.table_names():
        command = CreateCacheTable()
        command.verbosity = 0
        command.create_table(alias, TABLE, dry_run=False)


def drop(apps, schema_editor):
    schema_editor.execute(f"DROP TABLE IF EXISTS {schema_editor.quote_name(TABLE)}")


class Migration(migrations.Migration):
    dependencies = []
    operations = [migrations.RunPython(create, drop)]
