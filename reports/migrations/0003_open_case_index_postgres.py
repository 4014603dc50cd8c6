"""The dashboard's live numbers (workload, due dates) read only open cases: a partial index on them,
covering every column those queries and their filters read, so PostgreSQL answers from the index
alone (an index-only scan of about a fifth of the cases) instead of scanning the case table.

PostgreSQL only; `makemigrations` does not see it (it is not in a model's Meta). The open statuses are
copied here (a migration must not change under a later edit): cases.models.OPEN_STATUSES."""

from django.db import migrations, models

OPEN_STATUSES = ["new", "ready_for_decision", "triaged", "under_review", "waiting_for_evidence"]
INDEX = models.Index(
    fields=["tenant", "assignee"], name="reports_open_case_cover",
    include=["id", "assigned_team", "product", "received_at", "created_at", "next_due", "acknowledge_due",
             "response_due", "close_due"],
    condition=models.Q(status__in=OPEN_STATUSES))


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(apps.get_model("cases", "Case"), INDEX)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("cases", "Case"), INDEX)


class Migration(migrations.Migration):
    dependencies = [("reports", "0002_month_rollup"), ("cases", "0010_case_next_due")]

    operations = [migrations.RunPython(create, drop)]
