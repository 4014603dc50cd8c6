"""Indexes for the case queue, the review inbox and the audit timeline at 100,000 cases.

PostgreSQL only (SQLite needs none at the sizes it serves): (tenant, sort key, id) indexes for
each keyset-paginated order (the search has its own table and index: 0003, 0004). They are built from the same expressions cases.selectors queries
with (copied here, as a migration must not change under a later edit): an index only serves a
query whose expression compiles to the same SQL. They live in this app's migrations because the
queue owns them; `makemigrations` does not see them (they are not in a model's Meta)."""

from datetime import date

from django.db import migrations, models
from django.db.models import Case, F, IntegerField, Value, When
from django.db.models.functions import Coalesce

RISK_RANK = {"unassessed": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
STATUS_RANK = {"new": 0, "triaged": 1, "under_review": 2, "waiting_for_evidence": 3, "ready_for_decision": 4,
               "decided": 5, "closed": 6}


def _rank(field, ranks):
    return Case(*[When(**{field: value}, then=Value(rank)) for value, rank in ranks.items()],
                default=Value(0), output_field=IntegerField())


def _indexes():
    return {
        ("cases", "Case"): [
            models.Index(F("tenant"), F("created_at"), F("id"), name="web_case_created_key"),
            models.Index(F("tenant"), F("updated_at"), F("id"), name="web_case_updated_key"),
            models.Index(F("tenant"), Coalesce("received_at", Value(date(1, 1, 1))), F("id"),
                         name="web_case_received_key"),
            models.Index(F("tenant"), _rank("risk_level", RISK_RANK), F("id"), name="web_case_risk_key"),
            models.Index(F("tenant"), _rank("status", STATUS_RANK), F("id"), name="web_case_status_key"),
        ],
        ("cases", "Proposal"): [
            models.Index(fields=["tenant", "status", "created_at", "id"], name="web_proposal_inbox_key"),
            models.Index(fields=["case", "status"], name="web_proposal_case_status"),
        ],
        ("cases", "Notice"): [
            models.Index(fields=["tenant", "status", "created_at", "id"], name="web_notice_inbox_key"),
            models.Index(fields=["case", "status"], name="web_notice_case_status"),
        ],
        ("audit", "AuditEvent"): [
            models.Index(fields=["tenant", "created_at", "id"], name="web_audit_timeline_key"),
            models.Index(fields=["tenant", "actor_type", "created_at", "id"], name="web_audit_people_key"),
        ],
    }


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for (app_label, model_name), indexes in _indexes().items():
        model = apps.get_model(app_label, model_name)
        for index in indexes:
            schema_editor.add_index(model, index)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for (app_label, model_name), indexes in _indexes().items():
        model = apps.get_model(app_label, model_name)
        for index in indexes:
            schema_editor.remove_index(model, index)


class Migration(migrations.Migration):

    dependencies = [
        ("web", "0001_saved_views"),
        ("cases", "0003_requested_by"),
        ("audit", "0002_append_only_triggers"),
    ]

    operations = [migrations.RunPython(create, drop)]
