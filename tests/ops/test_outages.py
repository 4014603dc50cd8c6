"""A database or broker outage answers 503 with Retry-After — JSON in the API's error shape under
/api/, a short page that reloads itself in the browser — never a 500; and it is logged once per
outage, not once per request."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError
from django.db.backends import utils as db_utils
from kombu.exceptions import OperationalError as BrokerOperationalError

from cases.models import Case
from core import outages
from core.api import handler500
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


@pytest.fixture
def database_down(monkeypatch):
    """Every query fails the way a refused connection does."""
    def refuse(self, *args, **kwargs):
        raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')

    def down():
        monkeypatch.setattr(db_utils.CursorWrapper, "execute", refuse)
        monkeypatch.setattr(db_utils.CursorWrapper, "executemany", refuse)

    for log in outages.REQUEST_OUTAGES.values():
        log.failures = 0
    return down


def test_an_api_request_during_a_database_outage_is_a_json_503_with_retry_after(client, analyst, database_down,
                                                                                settings):
    settings.ARBITER_OUTAGE_RETRY_AFTER_SECONDS = 7
    client.force_login(analyst)
    database_down()
    response = client.get("/api/v1/cases/")
    assert response.status_code == 503
    assert response["Retry-After"] == "7"
    assert response.json() == {"code": "unavailable",
                               "detail": "The database is unreachable right now; nothing was changed. "
                                         "Retry in 7 seconds."}


def test_a_page_during_a_database_outage_is_a_503_page_not_a_500(client, analyst, database_down):
    client.force_login(analyst)
    database_down()
    response = client.get("/")
    assert response.status_code == 503 and response["Retry-After"] == "10"
    page = response.content.decode()
    assert "Arbiter is briefly unavailable" in page and "the database" in page
    assert '<meta http-equiv="refresh" content="10">' in page


def test_a_write_refused_by_an_outage_changes_nothing(client, analyst, case, monkeypatch):
    """The outage strikes inside the service's transaction: 503, and the case is as it was."""
    client.force_login(analyst)
    client.get("/")  # session and user loaded while the database answers

    def broker_down(*args, **kwargs):
        raise BrokerOperationalError("[Errno 111] Connection refused")

    monkeypatch.setattr("cases.services.case_transition", broker_down)
    with assert_nothing_changed(case):
        response = client.post(f"/api/v1/cases/{case.reference}/transitions/", {"transition": "triage"},
                               content_type="application/json")
    assert response.status_code == 503, response.content
    assert response.json()["code"] == "unavailable" and "task broker" in response.json()["detail"]
    assert Case.objects.get(pk=case.pk).status == case.status


def test_an_outage_outside_any_view_is_still_a_503_and_any_other_error_a_500(rf):
    """Middleware that fails after the view (a session saved to an unreachable database) reaches
    handler500, which Django calls inside its `except`."""
    for path, content_type in (("/api/v1/cases/", "application/json"), ("/cases/", "text/html; charset=utf-8")):
        try:
            raise OperationalError("server closed the connection unexpectedly")
        except OperationalError:
            response = handler500(rf.get(path))
        assert (response.status_code, response["Retry-After"], response["Content-Type"]) == (503, "10", content_type)
    try:
        raise ValueError("a bug")
    except ValueError:
        assert handler500(rf.get("/api/v1/cases/")).status_code == 500


def test_requests_during_one_outage_log_one_warning_and_one_line_when_it_ends(client, analyst, database_down,
                                                                             caplog, monkeypatch):
    client.force_login(analyst)
    database_down()
    with caplog.at_level(logging.INFO):
        for _ in range(5):
            assert client.get("/api/v1/cases/").status_code == 503
    failing = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(failing) == 1 and "the database failing: OperationalError" in failing[0].getMessage()
    assert not any(r.levelno >= logging.ERROR for r in caplog.records)
    caplog.clear()
    monkeypatch.undo()
    with caplog.at_level(logging.WARNING):
        assert client.get("/api/v1/cases/").status_code == 200
    assert [r.getMessage() for r in caplog.records] == [
        caplog.records[0].getMessage()] and "works again after 5 failure(s)" in caplog.records[0].getMessage()


def test_a_programming_error_is_not_mistaken_for_an_outage():
    from django.db import IntegrityError, ProgrammingError

    assert outages.outage_kind(ProgrammingError("no such column")) is None
    assert outages.outage_kind(IntegrityError("duplicate key")) is None
    assert outages.outage_kind(ValueError("bad")) is None
    assert outages.outage_kind(OperationalError("server closed the connection unexpectedly")) == "database"
    assert outages.outage_kind(BrokerOperationalError("refused")) == "broker"


def test_a_periodic_task_failing_on_an_outage_is_one_warning_not_a_traceback_per_attempt(caplog):
    import sys

    from core.outages import OutageLogFilter

    trace = logging.getLogger("test.celery.app.trace")
    trace.addFilter(OutageLogFilter())
    with caplog.at_level(logging.INFO):
        for error in [OperationalError("server closed the connection unexpectedly")] * 4 + [ValueError("a bug")]:
            try:
                raise error
            except Exception:
                trace.error("Task %(name)s raised unexpected", {"name": "outbox.tasks.outbox_relay_task"},
                            exc_info=sys.exc_info(), extra={"data": {"name": "outbox.tasks.outbox_relay_task"}})
    records = [(r.levelname, r.getMessage().split(":")[0], bool(r.exc_info)) for r in caplog.records]
    assert records == [("WARNING", "task outbox.tasks.outbox_relay_task failing", False),
                       ("ERROR", "Task outbox.tasks.outbox_relay_task raised unexpected", True)]
