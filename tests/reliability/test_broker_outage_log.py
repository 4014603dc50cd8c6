"""A real Celery worker on a throwaway Redis that stops for a while and starts again: the worker
logs the outage once when it starts and once, with the count of failed reconnects, when it ends —
none of Celery's per-attempt "Cannot connect to …" ERRORs, no traceback."""

from __future__ import annotations

import re
import time

import pytest

from tests.reliability.conftest import cluster_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_broker_outage_is_one_warning_and_one_line_with_the_count(tmp_path, redis_server, cluster_factory):
    cluster = cluster_factory(cluster_env(tmp_path, broker_url=redis_server.url))
    cluster.worker("w1")
    log = tmp_path / "log" / "w1.log"
    wait_until(lambda: "ready." in log.read_text(errors="replace"), timeout=60, what="the worker to be ready")

    redis_server.stop()
    wait_until(lambda: "the broker connection failing" in log.read_text(errors="replace"), timeout=30,
               what="the worker to notice the outage")
    time.sleep(8)  # Celery retries after 2, 4, 6 … seconds: several failed reconnects
    redis_server.start()
    wait_until(lambda: "the broker connection works again" in log.read_text(errors="replace"), timeout=60,
               what="the worker to reconnect")
    cluster.stop()

    text = log.read_text(errors="replace")
    assert text.count("the broker connection failing") == 1, text[-3000:]
    ended = re.findall(r"the broker connection works again after (\d+) failure\(s\)", text)
    assert len(ended) == 1 and int(ended[0]) >= 3, text[-3000:]
    for noise in ("Cannot connect to", "Connection to broker lost", "Traceback", "CPendingDeprecationWarning"):
        assert noise not in text, (noise, text[-3000:])
