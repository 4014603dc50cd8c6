"""Indexes for the audit filters whose rows can be rare, at 1,000,000 audit events.

The timeline's filters by person, action and decision, and the audit events API's action filter,
read the ledger newest first. When the filter matches few events (a person who decided ten things, an
action nobody took) nothing stopped the scan early: 0.2–0.5 s at 1,000,000 events. With these, each
reads only the matching rows:

- `(tenant, actor_id, created_at, id)` and `(tenant, decision, created_at, id)`: the timeline's
  person and decision filters, in the timeline's order (an equality, then the keyset key);
- `action varchar_pattern_ops`: the action filter is a prefix (`LIKE 'cases.notice%'`), which a
  plain b-tree serves only under the "C" collation (the database's may be another, e.g. C.UTF-8).

PostgreSQL only, like 0002 (SQLite serves smaller ledgers); not in a model's Meta, so
`makemigrations` does not see them. The definitions must not change afterwards."""

from django.db import migrations, models


def _indexes():
    return [
        models.Index(fields=["tenant", "actor_id", "created_at", "id"], name="web_audit_actor_key"),
        models.Index(fields=["tenant", "decision", "created_at", "id"], name="web_audit_decision_key"),
        models.Index(fields=["action"], opclasses=["varchar_pattern_ops"], name="web_audit_action_prefix"),
    ]


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    model = apps.get_model("audit", "AuditEvent")
    for index in _indexes():
        schema_editor.add_index(model, index)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    model = apps.get_model("audit", "AuditEvent")
    for index in _indexes():
        schema_editor.remove_index(model, index)


class Migration(migrations.Migration):

    dependencies = [
        ("web", "0004_case_words_triggers_postgres"),
        ("audit", "0003_audit_verified_head"),
    ]

    operations = [migrations.RunPython(create, drop)]
