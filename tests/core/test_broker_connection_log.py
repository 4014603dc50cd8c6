"""Celery's consumer during a broker outage (core.outages.BrokerConnectionLogFilter, installed by
config.celery): the connection's loss and every failed reconnect — an ERROR every few seconds, in
Celery's own words — are one warning when the outage starts and one line with the count when the
consumer is connected again; anything else the consumer logs passes through."""

from __future__ import annotations

import logging

import pytest
from celery.worker.consumer import consumer as celery_consumer
from kombu.exceptions import OperationalError as BrokerOperationalError

import config.celery
from core.outages import BrokerConnectionLogFilter

URI = "redis://:**@127.0.0.1:6379/5"


def _outage(logger: logging.Logger, attempts: int) -> None:
    """What Celery's consumer logs when the connection drops and `attempts` reconnects fail."""
    refused = BrokerOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    logger.warning("%s (%r)", celery_consumer.CONNECTION_RETRY, ConnectionError("Connection closed by server."))
    for attempt in range(1, attempts + 1):
        step = celery_consumer.CONNECTION_RETRY_STEP.format(when=f"in {2 * attempt}.00 seconds", retries=attempt,
                                                           max_retries=100)
        logger.error(celery_consumer.CONNECTION_ERROR, URI, refused, step)


@pytest.fixture
def consumer_logger():
    logger = logging.getLogger("test.celery.worker.consumer.consumer")
    log_filter = BrokerConnectionLogFilter()
    logger.addFilter(log_filter)
    yield logger, log_filter
    logger.removeFilter(log_filter)


def test_an_outage_is_one_warning_and_its_end_one_line_with_the_count(consumer_logger, caplog):
    logger, log_filter = consumer_logger
    with caplog.at_level(logging.DEBUG):
        _outage(logger, attempts=7)
        logger.info("Skipping prefetch count reduction after connection restart")  # not about the connection
        log_filter.connected()
        log_filter.connected()  # connected again with no outage in between: nothing to say
    lines = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert [(name, level) for name, level, _ in lines] == [
        ("arbiter.outages", "WARNING"), ("test.celery.worker.consumer.consumer", "INFO"),
        ("arbiter.outages", "WARNING")]
    assert lines[0][2].startswith("worker: the broker connection failing: ConnectionError: Connection closed")
    assert "works again after 8 failure(s)" in lines[2][2]  # the loss and 7 reconnects
    assert not any("Cannot connect" in message or "Traceback" in message for _, _, message in lines)


def test_each_outage_is_said_once(consumer_logger, caplog):
    logger, log_filter = consumer_logger
    with caplog.at_level(logging.WARNING):
        for attempts in (2, 3):
            _outage(logger, attempts)
            log_filter.connected()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4
    assert ["failing" in m for m in messages] == [True, False, True, False]
    assert "after 3 failure(s)" in messages[1] and "after 4 failure(s)" in messages[3]


def test_a_first_connection_that_fails_is_the_start_of_an_outage_too(consumer_logger, caplog):
    logger, log_filter = consumer_logger
    with caplog.at_level(logging.WARNING):
        refused = BrokerOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        for _ in range(3):  # on_connection_error_before_connected
            logger.error(celery_consumer.CONNECTION_ERROR, URI, refused, "Trying to reconnect...")
        log_filter.connected()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("worker: the broker connection failing: OperationalError: Error 111")
    assert "after 3 failure(s)" in messages[1] and len(messages) == 2


def test_the_worker_installs_it_on_celerys_consumer_logger_with_a_step_after_each_connection():
    installed = logging.getLogger("celery.worker.consumer.consumer").filters
    assert config.celery.BROKER_CONNECTION_LOG in installed
    assert config.celery.BrokerReconnected in config.celery.app.steps["consumer"]
    assert config.celery.BrokerReconnected.requires == ("celery.worker.consumer.connection:Connection",)
