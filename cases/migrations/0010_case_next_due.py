"""Case.next_due stored: the earliest due date still open, which the queue sorts on with
an index (it was computed per query; PostgreSQL could not use an index for it). Filled here for the
existing cases with one UPDATE; from now on cases.services.deadlines.recompute_next_due keeps it.

The fill is a frozen copy of cases.models.next_due_expression (a migration must not change under a
later edit of the model): acknowledgement and response until a notice is sent, closure until the
case is decided or closed; NULL when none."""

import datetime

import django.db.models.functions.comparison
from django.conf import settings
from django.db import migrations, models
from django.db.models.functions import Coalesce, Least


def _least(a, b):
    return Least(Coalesce(a, b), Coalesce(b, a), output_field=models.DateField())


def fill_next_due(apps, schema_editor):
    Case = apps.get_model("cases", "Case")
    Notice = apps.get_model("cases", "Notice")
    sent = models.Exists(Notice.objects.filter(case=models.OuterRef("pk"), status="sent"))
    open_notice = models.Case(models.When(sent, then=models.Value(None)),
                              default=_least("acknowledge_due", "response_due"), output_field=models.DateField())
    open_close = models.Case(models.When(status__in=["decided", "closed"], then=models.Value(None)),
                             default=models.F("close_due"), output_field=models.DateField())
    Case.objects.using(schema_editor.connection.alias).update(next_due=_least(open_notice, open_close))


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_api_keys_and_service_accounts'),
        ('cases', '0009_merge_notice_unknown_and_review_loop'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='case',
            name='next_due',
            field=models.DateField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(fill_next_due, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name='case',
            index=models.Index(models.F('tenant'), django.db.models.functions.comparison.Coalesce('next_due', models.Value(datetime.date(9999, 12, 31)), output_field=models.DateField()), models.F('id'), name='case_next_due_asc_key'),
        ),
        migrations.AddIndex(
            model_name='case',
            index=models.Index(models.F('tenant'), django.db.models.functions.comparison.Coalesce('next_due', models.Value(datetime.date(1, 1, 1)), output_field=models.DateField()), models.F('id'), name='case_next_due_desc_key'),
        ),
    ]
