"""CaseWords is the cases app's model now (cases migration 0011): the table stays; only the state moves."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("web", "0007_notifications_read"),
        ("cases", "0011_case_words_in_cases"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="CaseWords")],
            database_operations=[],
        ),
    ]
