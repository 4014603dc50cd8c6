"""retry_on_deadlock: a transaction PostgreSQL aborted for a lock conflict runs again, a bounded
number of times, then the API answers 503 `busy` (never a 500) and nothing changed."""

import psycopg.errors
import pytest
from django.db import OperationalError, transaction

from core.db import is_lock_conflict, retry_on_deadlock
from core.errors import Busy
from integrations.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from tests.api.conftest import assert_error
from tests.helpers import assert_nothing_changed


def _deadlock() -> OperationalError:
    """What Django raises when PostgreSQL breaks a deadlock: its wrapper, caused by psycopg's error."""
    try:
        raise OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected("deadlock detected")
    except OperationalError as exc:
        return exc


def test_lock_conflicts_are_recognised_and_other_errors_are_not():
    assert is_lock_conflict(_deadlock())
    assert is_lock_conflict(psycopg.errors.SerializationFailure("could not serialize"))
    assert not is_lock_conflict(OperationalError("connection refused"))
    assert not is_lock_conflict(ValueError("no"))


@pytest.mark.django_db(transaction=True)
def test_a_deadlock_is_retried_once_then_succeeds():
    attempts = []

    @retry_on_deadlock(pause=0)
    def change():
        attempts.append(1)
        if len(attempts) == 1:
            raise _deadlock()
        return "done"

    assert change() == "done"
    assert len(attempts) == 2


@pytest.mark.django_db(transaction=True)
def test_it_gives_up_after_the_attempts_with_busy_and_does_not_retry_other_errors():
    attempts = []

    @retry_on_deadlock(attempts=4, pause=0)
    def always_deadlocks():
        attempts.append(1)
        raise _deadlock()

    with pytest.raises(Busy) as raised:
        always_deadlocks()
    assert len(attempts) == 4 and raised.value.http_status == 503

    @retry_on_deadlock(pause=0)
    def fails_otherwise():
        attempts.append(1)
        raise OperationalError("connection refused")

    attempts.clear()
    with pytest.raises(OperationalError):
        fails_otherwise()
    assert len(attempts) == 1


@pytest.mark.django_db(transaction=True)
def test_inside_a_callers_transaction_or_another_retry_it_does_not_retry():
    attempts = []

    @retry_on_deadlock(pause=0)
    def inner():
        attempts.append(1)
        raise _deadlock()

    with pytest.raises(OperationalError), transaction.atomic():
        inner()
    assert len(attempts) == 1

    @retry_on_deadlock(attempts=2, pause=0)
    def outer():
        inner()

    attempts.clear()
    with pytest.raises(Busy):
        outer()
    assert len(attempts) == 2  # not 2 x 3


@pytest.mark.django_db(transaction=True)
def test_an_api_write_that_keeps_deadlocking_is_503_busy_and_changes_nothing(api, supervisor, monkeypatch):
    endpoint = WebhookEndpoint.objects.create(tenant=supervisor.tenant, url="https://hooks.example.com/x",
                                              event_types=["case.changed"], secret="whsec_x", created_by=supervisor)
    attempts = []

    def deadlocks(**kwargs):
        attempts.append(1)
        with transaction.atomic():
            WebhookEndpoint.objects.filter(pk=endpoint.pk).update(description="half-written")
            raise _deadlock()

    monkeypatch.setattr("integrations.api.views.webhook_endpoint_update", deadlocks)
    monkeypatch.setattr("core.db.time.sleep", lambda seconds: None)
    with assert_nothing_changed(extra={"endpoint": lambda: WebhookEndpoint.objects.values().get(pk=endpoint.pk)}):
        response = api(supervisor).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"description": "new"},
                                          format="json")
    body = assert_error(response, 503, "busy")
    assert "nothing was changed" in body["detail"] and response["Retry-After"] == "1"
    assert len(attempts) == 3


@pytest.mark.django_db(transaction=True)
def test_an_api_write_that_deadlocks_once_succeeds_on_the_retry(api, supervisor, monkeypatch):
    endpoint = WebhookEndpoint.objects.create(tenant=supervisor.tenant, url="https://hooks.example.com/x",
                                              event_types=["case.changed"], secret="whsec_x", created_by=supervisor)
    from integrations import webhooks

    attempts = []
    real = webhooks._endpoint_change

    def first_deadlocks(*args):
        attempts.append(1)
        if len(attempts) == 1:
            raise _deadlock()
        return real(*args)

    monkeypatch.setattr(webhooks, "_endpoint_change", first_deadlocks)
    response = api(supervisor).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"description": "new"}, format="json")
    assert response.status_code == 200, response.content
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).description == "new" and len(attempts) == 2
    assert WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).count() == 0


@pytest.mark.django_db
def test_a_lock_conflict_where_it_cannot_be_retried_is_still_503_not_500(api, supervisor, monkeypatch):
    """Inside an enclosing transaction (the test's own here) the retry stands aside; the API's
    exception handler still answers 503 busy."""
    endpoint = WebhookEndpoint.objects.create(tenant=supervisor.tenant, url="https://hooks.example.com/x",
                                              event_types=["case.changed"], secret="whsec_x", created_by=supervisor)
    attempts = []

    def deadlocks(**kwargs):
        attempts.append(1)
        raise _deadlock()

    monkeypatch.setattr("integrations.api.views.webhook_endpoint_update", deadlocks)
    response = api(supervisor).patch(f"/api/v1/webhooks/{endpoint.pk}/", {"description": "new"}, format="json")
    assert_error(response, 503, "busy")
    assert response["Retry-After"] == "1" and len(attempts) == 1
