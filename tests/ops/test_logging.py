"""Structured logs carry the ids of the request, user, tenant, case, run and step, in the web and
in Celery tasks alike."""

import io
import json
import logging

import pytest
import structlog
from django.urls import reverse

from ops.celery_signals import REQUEST_ID_HEADER, _carry_request_id
from ops.logging import formatter_config
from runs.models import AgentRun, RunStatus


@pytest.fixture
def json_lines():
    """Every log line, rendered by the production JSON formatter, as parsed objects."""
    stream = io.StringIO()
    config = dict(formatter_config("json"))
    factory = config.pop("()")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(factory(**config))
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


@pytest.mark.django_db(transaction=True)
def test_a_run_started_from_a_page_logs_with_the_request_tenant_case_and_run_ids(client, analyst, case, settings,
                                                                               json_lines):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the step tasks run inside the request, as eager tasks
    client.force_login(analyst)
    response = client.post(reverse("web:case_analyse", args=[case.reference]), HTTP_X_REQUEST_ID="req-42")
    assert response.status_code in (200, 302)
    run = AgentRun.objects.get(case=case)
    assert run.status == RunStatus.COMPLETED, run.error

    lines = json_lines()
    started = [line for line in lines if line["event"] == "task.started"]
    assert started, lines[-5:]
    first = started[0]
    assert (first["request_id"], first["tenant_id"], first["case_id"], first["run_id"], first["step"]) == (
        "req-42", analyst.tenant_id, case.pk, run.pk, 1)
    assert first["task"] == "runs.tasks.run_step_task" and first["level"] == "info" and first["timestamp"]
    finished = [line for line in lines if line["event"] == "request.finished"]
    assert finished[-1]["request_id"] == "req-42" and finished[-1]["user_id"] == analyst.pk
    assert finished[-1]["tenant_id"] == analyst.tenant_id and finished[-1]["case_ref"] == case.reference
    # Nothing bound for the request outlives it.
    assert structlog.contextvars.get_contextvars() == {}


def test_a_task_published_during_a_request_carries_its_request_id():
    structlog.contextvars.bind_contextvars(request_id="req-7")
    try:
        headers: dict = {}
        _carry_request_id(headers=headers)
    finally:
        structlog.contextvars.clear_contextvars()
    assert headers == {REQUEST_ID_HEADER: "req-7"}
