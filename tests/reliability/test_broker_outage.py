"""The broker stopped while runs are started and notices are sent, then started again (real Celery
worker and beat on a throwaway Redis, PostgreSQL): every request that committed succeeded, every
outbox row is delivered once the broker is back, nothing is done twice."""

from __future__ import annotations

import json
import time

import pytest

from outbox.models import OutboxMessage
from runs.models import AgentRun
from tests.reliability.conftest import cluster_env, wait_until
from tests.reliability.scenario import (
    analysable_cases,
    approved_notices,
    assert_each_notice_sent_once,
    assert_every_run_complete_and_every_effect_once,
    assert_ledger_verifies,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REQUESTS = """
import json
from accounts.models import User
from cases.models import Case, Notice
from cases.services import notice_dispatch_request
from runs.services import run_start
user = User.objects.get(username="analyst")
plan = json.loads({plan!r})
runs = [run_start(actor=user, case=Case.objects.get(pk=pk)).pk for pk in plan["cases"]]
for pk in plan["notices"]:
    notice_dispatch_request(actor=user, notice=Notice.objects.get(pk=pk))
print("RUNS", json.dumps(runs))
"""


def test_a_broker_outage_delays_work_and_loses_none(analyst, supervisor, tmp_path, redis_server, cluster_factory):
    cases = analysable_cases(analyst, 5)
    by_command = cases.pop()  # started with `manage.py analyze`
    notices = approved_notices(analyst, supervisor, 3)
    cluster = cluster_factory(cluster_env(tmp_path, broker_url=redis_server.url))
    cluster.worker("w1", concurrency=2)
    cluster.beat()
    wait_until(lambda: "ready." in cluster.logs(), timeout=60, what="the worker to be ready")

    redis_server.stop()  # the broker goes down; web requests and commands go on
    plan = json.dumps({"cases": [c.pk for c in cases], "notices": [n.pk for n in notices]})
    result = cluster.manage("shell", "-c", REQUESTS.format(plan=plan))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    run_ids = json.loads(result.stdout.split("RUNS", 1)[1])
    started = time.monotonic()
    analyze = cluster.manage("analyze", by_command.reference, "--tenant", by_command.tenant.slug)
    assert analyze.returncode == 0 and "Traceback" not in analyze.stdout + analyze.stderr, analyze.stderr
    assert "Started run R" in analyze.stdout
    print(f"manage.py analyze with the broker down: {time.monotonic() - started:.1f}s")
    run_ids.append(AgentRun.objects.get(case=by_command).pk)
    pending = OutboxMessage.objects.filter(relayed_at__isnull=True)
    assert pending.count() == 8 and all(row.last_error for row in pending)  # committed, waiting, errors recorded

    redis_server.start()
    restarted = []

    def relayed():
        restarted.extend(cluster.supervise())  # a process supervisor restarts a worker the outage crashed
        return not OutboxMessage.objects.filter(relayed_at__isnull=True).exists()

    wait_until(relayed, timeout=60, what="the relay to publish every outbox row")
    print(f"workers restarted by the supervisor after the outage: {restarted or 'none'}")
    runs = list(AgentRun.objects.filter(pk__in=run_ids))
    wait_until(lambda: all(AgentRun.objects.get(pk=r.pk).is_finished for r in runs), timeout=150,
               what="every run to finish")
    wait_until(lambda: all(n.__class__.objects.get(pk=n.pk).status == "sent" for n in notices), timeout=60,
               what="every notice to be sent")
    cluster.stop()
    assert_every_run_complete_and_every_effect_once(runs)
    assert_each_notice_sent_once(notices, tmp_path / "mail")
    assert OutboxMessage.objects.filter(relayed_at__isnull=True).count() == 0
    assert_ledger_verifies()
