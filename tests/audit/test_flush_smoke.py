import pytest

from audit.models import AuditEvent


@pytest.mark.django_db(transaction=True)
def test_transactional_tests_can_flush_a_database_holding_audit_events(case):
    # The teardown flush of this transactional test must not be aborted by the append-only triggers.
    assert AuditEvent.objects.filter(stream=f"case:{case.pk}").exists()


@pytest.mark.django_db(transaction=True)
def test_flush_left_the_triggers_in_place(analyst):
    from django.db import connection

    from tests.factories import make_case

    case = make_case(actor=analyst)
    with pytest.raises(Exception, match="append-only"):
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM audit_auditevent WHERE stream = %s", [f"case:{case.pk}"])
