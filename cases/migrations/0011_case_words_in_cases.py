"""The case search document (CaseWords) becomes the cases app's: the same table (web_casewords) and
triggers; only Django's record of which app owns the model moves (web migration 0008 drops it there)."""

import django.contrib.postgres.search
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("cases", "0010_case_next_due"),
        ("web", "0007_notifications_read"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="CaseWords",
                    fields=[
                        ("case", models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING,
                                                      primary_key=True, related_name="+", serialize=False,
                                                      to="cases.case")),
                        ("tenant_id", models.BigIntegerField()),
                        ("words", django.contrib.postgres.search.SearchVectorField()),
                    ],
                    options={"db_table": "web_casewords", "default_permissions": ()},
                ),
            ],
            database_operations=[],
        ),
    ]
