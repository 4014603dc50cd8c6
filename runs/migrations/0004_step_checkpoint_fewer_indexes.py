"""Fewer index writes per executed step (ADR 0010 "Write cost per step"): Step.run and
Checkpoint.run lose their own FK indexes (the unique (run, sequence) constraints lead with run);
Step.copied_from, set only on fork copies, gets a partial index that an executed step does not
write. On PostgreSQL the run table gets fillfactor 70 so that the per-step UPDATE of a run row
finds room on its page (a HOT update: no index entry written)."""

import django.db.models.deletion
from django.db import migrations, models


def fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE runs_agentrun SET (fillfactor = 70)")


def fillfactor_reset(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE runs_agentrun RESET (fillfactor)")


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0003_checkpoint_compaction_and_run_state_position'),
    ]

    operations = [
        migrations.AlterField(
            model_name='checkpoint',
            name='run',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='checkpoints', to='runs.agentrun'),
        ),
        migrations.AlterField(
            model_name='step',
            name='copied_from',
            field=models.ForeignKey(blank=True, db_index=False, help_text="For a fork: the parent's step this one reproduces.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='runs.step'),
        ),
        migrations.AlterField(
            model_name='step',
            name='run',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='runs.agentrun'),
        ),
        migrations.AddIndex(
            model_name='step',
            index=models.Index(condition=models.Q(('copied_from__isnull', False)), fields=['copied_from'], name='runs_step_copied_from_set'),
        ),
        migrations.RunPython(fillfactor, fillfactor_reset),
    ]
