"""The wipe between transactional tests on PostgreSQL (audit/management/commands/flush.py): DELETEs
with the triggers off, leaving what Django's TRUNCATE leaves; every other flush is Django's."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Role
from tests.factories import TenantFactory, UserFactory, make_case

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _row_counts() -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.django_table_names(only_existing=True, include_views=False):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return counts


def _flush_sql(**options) -> str:
    with CaptureQueriesContext(connection) as queries:
        call_command("flush", interactive=False, verbosity=0, **options)
    return " ".join(query["sql"] for query in queries.captured_queries)


def _a_case():
    tenant = TenantFactory()
    return make_case(actor=UserFactory(tenant=tenant, role=Role.ANALYST))


def test_the_transactional_tests_wipe_deletes_and_leaves_what_truncate_leaves(monkeypatch):
    _a_case()
    sql = _flush_sql(reset_sequences=False)  # what TransactionTestCase asks for
    assert "DELETE FROM" in sql and "TRUNCATE" not in sql
    after_delete = _row_counts()
    assert after_delete["audit_auditevent"] == 0 and after_delete["cases_case"] == 0

    _a_case()
    monkeypatch.setattr("audit.management.commands.flush.can_disable_triggers", lambda connection: False)
    sql = _flush_sql(reset_sequences=False)  # a role that may not turn the triggers off: Django's TRUNCATE
    assert "TRUNCATE" in sql and "DELETE FROM" not in sql
    assert _row_counts() == after_delete  # the same tables empty, the same rows post_migrate recreates


def test_after_the_wipe_the_append_only_triggers_refuse_again():
    _a_case()
    _flush_sql(reset_sequences=False)
    case = _a_case()
    with pytest.raises(Exception, match="append-only"), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE stream = %s", [f"case:{case.pk}"])


def test_an_operators_flush_still_truncates_and_restarts_the_sequences():
    _a_case()
    sql = _flush_sql()  # manage.py flush: reset_sequences is True
    assert "TRUNCATE" in sql and "RESTART IDENTITY" in sql
    assert _row_counts()["cases_case"] == 0
