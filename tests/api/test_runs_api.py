"""/api/v1/runs/ (with steps, model calls, tool calls, findings, artifacts, cancel/resume/fork) and
/api/v1/memory/: every endpoint, its refusals (asserting nothing changed) and tenant isolation."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from cases.models import Proposal
from core.actors import Actor
from runs import services
from runs.models import AgentRun, Checkpoint, MemoryRecord, MemoryStatus, RunStatus, Step
from runs.selectors import run_completed_nodes
from tests.api.conftest import assert_error
from tests.factories import make_case
from tests.helpers import assert_nothing_changed
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    """Steps the code enqueues (after commit); nothing reaches a broker."""
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


@pytest.fixture
def analysed(analyst, case):
    run = drive(services.run_start(actor=analyst, case=case))
    assert run.status == RunStatus.COMPLETED and run.steps.count() == 8
    return run


def rows() -> dict:
    return {"runs": lambda: AgentRun.objects.count(), "steps": lambda: Step.objects.count(),
            "checkpoints": lambda: Checkpoint.objects.count(), "memory": lambda: MemoryRecord.objects.count(),
            "run_states": lambda: sorted(AgentRun.objects.values_list("pk", "status", "version"))}


# --- list and start ---------------------------------------------------------------------------

def test_runs_are_listed_and_filtered(api, analyst, case, analysed):
    queued = services.run_start(actor=analyst, case=case)
    client = api(analyst)
    body = client.get("/api/v1/runs/").json()
    assert len(body["results"]) == 2 and [r["id"] for r in body["results"]] == [queued.pk, analysed.pk]
    first = body["results"][1]
    assert (first["case"], first["graph"], first["status"], first["phase"]) == (case.reference, "case_analysis",
                                                                                "completed", "done")
    assert first["usage"] == {"steps_used": 8, "tokens_used": analysed.tokens_used}
    assert first["budget"]["max_steps"] == analysed.max_steps and first["parent_run"] is None
    assert [r["id"] for r in client.get("/api/v1/runs/?status=queued").json()["results"]] == [queued.pk]
    assert len(client.get(f"/api/v1/runs/?case={case.reference}&graph=case_analysis").json()["results"]) == 2
    assert len(client.get("/api/v1/runs/?case=CASE-1999-000001").json()["results"]) == 0
    assert len(client.get("/api/v1/runs/?graph=chat").json()["results"]) == 0


def test_a_runs_completed_nodes_come_from_its_steps_in_one_query_for_a_page(api, analyst, case, analysed,
                                                                            django_assert_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    nodes = list(analysed.steps.order_by("sequence").values_list("node", flat=True))
    assert len(nodes) == 8
    client = api(analyst)
    assert client.get(f"/api/v1/runs/{analysed.pk}/").json()["completed_nodes"] == nodes
    fork = services.run_fork(actor=analyst, run=analysed, from_sequence=3, enqueue=False)
    assert client.get(f"/api/v1/runs/{fork.pk}/").json()["completed_nodes"] == nodes[:3]  # the copied steps
    client.get("/api/v1/runs/")  # warm up (session, permissions)
    with CaptureQueriesContext(connection) as captured:
        body = client.get("/api/v1/runs/").json()
    one_run = len(captured)
    assert {r["id"]: r["completed_nodes"] for r in body["results"]} == {analysed.pk: nodes, fork.pk: nodes[:3]}
    more = [drive(services.run_start(actor=analyst, case=case)) for _ in range(2)]
    with django_assert_num_queries(one_run):  # the same queries for four runs as for two
        body = client.get("/api/v1/runs/").json()
    assert {r["id"]: r["completed_nodes"] for r in body["results"]} == {
        analysed.pk: nodes, fork.pk: nodes[:3], **{run.pk: run_completed_nodes(run=run) for run in more}}
    assert all(len(run_completed_nodes(run=run)) == 8 for run in more)


def test_an_unknown_status_filter_is_invalid(api, analyst):
    assert_error(api(analyst).get("/api/v1/runs/?status=exploded"), 400, "invalid", fields={"status"})


def test_runs_are_tenant_scoped(api, outsider, analysed):
    assert len(api(outsider).get("/api/v1/runs/").json()["results"]) == 0
    for url in (f"/api/v1/runs/{analysed.pk}/", f"/api/v1/runs/{analysed.pk}/steps/",
                f"/api/v1/runs/{analysed.pk}/steps/3/model-calls/", f"/api/v1/runs/{analysed.pk}/tool-calls/",
                f"/api/v1/runs/{analysed.pk}/findings/", f"/api/v1/runs/{analysed.pk}/artifacts/"):
        assert_error(api(outsider).get(url), 404, "not_found")


def test_starting_a_run_queues_it_and_says_where_it_stands(api, analyst, case, settings,
                                                          django_capture_on_commit_callbacks, enqueued):
    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 3
    with django_capture_on_commit_callbacks(execute=True):
        response = api(analyst).post("/api/v1/runs/", {"case": case.reference}, format="json")
    assert response.status_code == 202
    body = response.json()
    run = AgentRun.objects.get()
    assert body["id"] == run.pk and enqueued == [run.pk]
    assert (body["status"], body["graph"], body["queue_position"], body["running_runs"],
            body["max_concurrent_runs"]) == ("queued", "case_analysis", 1, 0, 3)
    assert body["started_by"] == f"user:{analyst.pk}" and body["provider_name"] == "offline"


def test_starting_with_a_budget_and_a_provider(api, analyst, case):
    body = api(analyst).post("/api/v1/runs/", {"case": case.reference, "provider": "offline",
                                               "budget": {"max_steps": 5}}, format="json").json()
    assert body["budget"]["max_steps"] == 5 and body["provider_name"] == "offline"


@pytest.mark.parametrize("data,fields", [
    ({}, {"case"}),
    ({"case": "{case}", "graph": "chat"}, {"graph"}),
    ({"case": "{case}", "provider": "no-such-provider"}, {"provider"}),
    ({"case": "{case}", "budget": {"max_steps": 0}}, {"budget"}),
])
def test_starting_with_bad_input_is_invalid_and_changes_nothing(api, analyst, case, data, fields):
    data = {key: (value.format(case=case.reference) if isinstance(value, str) else value) for key, value in data.items()}
    with assert_nothing_changed(case, extra=rows()):
        response = api(analyst).post("/api/v1/runs/", data, format="json")
    assert_error(response, 400, "invalid", fields=fields)


def test_starting_on_another_tenants_case_or_none_is_a_404_and_changes_nothing(api, outsider, analyst, case):
    """A reference that names no case of yours is not found (the schema cannot know which exist)."""
    for user, reference in ((outsider, case.reference), (analyst, "CASE-1999-000001")):
        with assert_nothing_changed(case, extra=rows()):
            response = api(user).post("/api/v1/runs/", {"case": reference}, format="json")
        body = assert_error(response, 404, "not_found", fields={"case"})
        assert "no case" in body["fields"]["case"][0]


def test_an_auditor_cannot_start_a_run_and_nothing_changes(api, auditor, case):
    with assert_nothing_changed(case, extra=rows()):
        response = api(auditor).post("/api/v1/runs/", {"case": case.reference}, format="json")
    assert "cannot start runs" in assert_error(response, 403, "forbidden")["detail"]


def test_anonymous_requests_are_refused(api, analysed):
    response = api().get(f"/api/v1/runs/{analysed.pk}/")
    assert response.status_code in (401, 403) and response.json()["code"] == "not_authenticated"


# --- detail and what the run did ------------------------------------------------------------

def test_a_run_detail_shows_its_queue_position_when_the_cap_is_reached(api, analyst, case, settings):
    settings.ARBITER_TENANT_MAX_CONCURRENT_RUNS = 1
    from runs.executor import run_step

    # The busy run is on another case: a second analysis of the same case would be the first one.
    busy = services.run_start(actor=analyst, case=make_case(actor=analyst, title="Another dispute"))
    run_step(run_id=busy.pk, worker_id="w1", enqueue=False)
    waiting = services.run_start(actor=analyst, case=case)
    body = api(analyst).get(f"/api/v1/runs/{waiting.pk}/").json()
    assert (body["status"], body["queue_position"], body["running_runs"], body["max_concurrent_runs"]) == (
        "queued", 1, 1, 1)
    running = api(analyst).get(f"/api/v1/runs/{busy.pk}/").json()
    assert running["status"] == "running" and running["queue_position"] is None
    assert running["current_node"] == "evidence_analyst" and running["next_sequence"] == 2


def test_steps_are_listed_in_order(api, analyst, analysed):
    body = api(analyst).get(f"/api/v1/runs/{analysed.pk}/steps/").json()
    assert [s["node"] for s in body["results"]] == ["triage", "evidence_analyst", "risk_assessor", "policy_checker",
                                                    "adjudicator", "reflect", "proposer", "notice_drafter"]
    assert [s["sequence"] for s in body["results"]] == list(range(1, 9))
    assert body["results"][-1]["outcome"] == "end" and body["results"][0]["next_node"] == "evidence_analyst"


def test_what_the_model_saw_at_step_3(api, analyst, analysed, case):
    body = api(analyst).get(f"/api/v1/runs/{analysed.pk}/steps/3/model-calls/").json()
    [call] = body["results"]
    evidence = case.evidence.get()
    assert call["agent"] == "risk_assessor" and call["output_schema"]
    assert call["source_refs"]["evidence"] == [{"id": evidence.pk, "sha256": evidence.sha256}]
    assert call["source_refs"]["case_version"] == call["context"]["case"]["version"]
    assert [m["role"] for m in call["messages"]] == ["system", "user"]
    assert "<untrusted_evidence" in call["messages"][1]["content"]
    assert call["validated_output"]["risk_level"] and call["raw_output"]
    assert call["prompt_tokens"] > 0


def test_a_step_without_a_model_call_lists_none_and_a_missing_step_is_404(api, analyst, analysed):
    assert len(api(analyst).get(f"/api/v1/runs/{analysed.pk}/steps/7/model-calls/").json()["results"]) == 0
    assert "has no step 9" in assert_error(api(analyst).get(f"/api/v1/runs/{analysed.pk}/steps/9/model-calls/"),
                                           404, "not_found")["detail"]


def test_tool_calls_findings_and_artifacts_carry_their_step_and_provenance(api, analyst, analysed):
    client = api(analyst)
    calls = client.get(f"/api/v1/runs/{analysed.pk}/tool-calls/").json()["results"]
    assert calls and {c["tool"] for c in calls} == {"proposal_create"}
    call = calls[0]
    assert call["idempotency_key"].startswith(f"{analysed.pk}:7:") and call["sequence"] == 7
    assert (call["effect_type"], call["policy_decision"], call["status"]) == ("draft", "allowed", "succeeded")
    assert Proposal.objects.filter(pk=int(call["external_ref"].split(":")[1]), run_id=str(analysed.pk)).exists()
    findings = client.get(f"/api/v1/runs/{analysed.pk}/findings/").json()["results"]
    assert {f["step_sequence"] for f in findings} <= set(range(1, 9)) and findings[0]["agent"] == "triage"
    artifacts = client.get(f"/api/v1/runs/{analysed.pk}/artifacts/").json()["results"]
    risk = next(a for a in artifacts if a["kind"] == "risk_assessment")
    assert risk["step_sequence"] == 3 and risk["produced_by"].startswith("agent:risk_assessor")
    assert risk["source_refs"]["evidence"] and len(risk["content_hash"]) == 64


# --- cancel / resume / fork --------------------------------------------------------------------

def test_cancelling_a_queued_run(api, analyst, case):
    run = services.run_start(actor=analyst, case=case)
    response = api(analyst).post(f"/api/v1/runs/{run.pk}/cancel/", {"reason": "Wrong case"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "cancelled" and "Wrong case" in body["error"]


def test_cancelling_a_finished_run_is_refused_and_nothing_changes(api, analyst, analysed):
    with assert_nothing_changed(analysed.case, extra=rows()):
        response = api(analyst).post(f"/api/v1/runs/{analysed.pk}/cancel/", {}, format="json")
    assert "nothing to cancel" in assert_error(response, 409, "not_allowed")["detail"]


def test_an_auditor_cannot_cancel_resume_or_fork_and_nothing_changes(api, auditor, analyst, case, analysed):
    queued = services.run_start(actor=analyst, case=case)
    client = api(auditor)
    with assert_nothing_changed(case, extra=rows()):
        assert_error(client.post(f"/api/v1/runs/{queued.pk}/cancel/", {}, format="json"), 403, "forbidden")
        assert_error(client.post(f"/api/v1/runs/{queued.pk}/resume/", {}, format="json"), 403, "forbidden")
        assert_error(client.post(f"/api/v1/runs/{analysed.pk}/fork/", {"from_step": 3}, format="json"), 403,
                     "forbidden")


@pytest.mark.parametrize("action,data", [("cancel", {}), ("resume", {}), ("fork", {"from_step": 3})])
def test_actions_on_another_tenants_run_are_404_and_change_nothing(api, outsider, analysed, action, data):
    with assert_nothing_changed(analysed.case, extra=rows()):
        response = api(outsider).post(f"/api/v1/runs/{analysed.pk}/{action}/", data, format="json")
    assert_error(response, 404, "not_found")


def test_resuming_a_run_that_ran_out_of_budget_with_a_higher_budget(api, analyst, case,
                                                                     django_capture_on_commit_callbacks, enqueued):
    run = drive(services.run_start(actor=analyst, case=case, budget={"max_steps": 2}))
    assert run.status == RunStatus.FAILED and run.error_code == "budget_exhausted"
    with django_capture_on_commit_callbacks(execute=True):
        response = api(analyst).post(f"/api/v1/runs/{run.pk}/resume/", {"budget": {"max_steps": 20}}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["budget"]["max_steps"], body["error"]) == ("queued", 20, "")
    assert enqueued == [run.pk]
    assert drive(run).status == RunStatus.COMPLETED


def test_resuming_a_completed_run_is_refused_and_nothing_changes(api, analyst, analysed):
    with assert_nothing_changed(analysed.case, extra=rows()):
        response = api(analyst).post(f"/api/v1/runs/{analysed.pk}/resume/", {}, format="json")
    assert "fork it from a checkpoint" in assert_error(response, 409, "not_allowed")["detail"]


def test_forking_from_step_3(api, analyst, analysed):
    response = api(analyst).post(f"/api/v1/runs/{analysed.pk}/fork/", {"from_step": 3}, format="json")
    assert response.status_code == 202
    body = response.json()
    fork = AgentRun.objects.get(pk=body["id"])
    assert (body["parent_run"], body["forked_from_sequence"], body["status"], body["next_sequence"]) == (
        analysed.pk, 3, "queued", 4)
    steps = api(analyst).get(f"/api/v1/runs/{fork.pk}/steps/").json()["results"]
    assert [s["node"] for s in steps] == ["triage", "evidence_analyst", "risk_assessor"]
    assert all(s["copied_from"] for s in steps)


@pytest.mark.parametrize("data,status,code", [({"from_step": 8}, 409, "not_allowed"),
                                              ({"from_step": 42}, 409, "not_allowed"),
                                              ({}, 400, "invalid"), ({"from_step": -1}, 400, "invalid")])
def test_forking_from_an_impossible_step_is_refused_and_nothing_changes(api, analyst, analysed, data, status, code):
    with assert_nothing_changed(analysed.case, extra=rows()):
        response = api(analyst).post(f"/api/v1/runs/{analysed.pk}/fork/", data, format="json")
    assert_error(response, status, code)


# --- memory ----------------------------------------------------------------------------------

def _memory(tenant, subject, content="Prefers short summaries with the key dates first."):
    return services.memory_propose(actor=Actor.agent("chat", "1"), tenant=tenant, subject=subject, content=content)


def memory_row(memory):
    return MemoryRecord.objects.filter(pk=memory.pk).values_list("status", "decided_by_id", "decision_note").first()


def test_memory_is_listed_and_filtered(api, analyst, analyst_b, tenant):
    mine = _memory(tenant, f"user:{analyst.pk}")
    theirs = _memory(tenant, f"user:{analyst_b.pk}", "Prefers bullet points.")
    services.memory_confirm(actor=analyst_b, memory=theirs)
    client = api(analyst)
    body = client.get("/api/v1/memory/").json()
    assert len(body["results"]) == 2
    assert [m["id"] for m in client.get("/api/v1/memory/?status=proposed").json()["results"]] == [mine.pk]
    assert [m["id"] for m in client.get(f"/api/v1/memory/?subject=user:{analyst_b.pk}").json()["results"]] == [
        theirs.pk]
    detail = client.get(f"/api/v1/memory/{theirs.pk}/").json()
    assert (detail["status"], detail["decided_by"]["username"], detail["is_expired"]) == ("active", "analyst_b", False)
    assert_error(client.get("/api/v1/memory/?status=remembered"), 400, "invalid", fields={"status"})


def test_confirming_and_forgetting_memory(api, analyst, tenant):
    memory = _memory(tenant, f"user:{analyst.pk}")
    client = api(analyst)
    body = client.post(f"/api/v1/memory/{memory.pk}/confirm/", {"note": "Yes"}, format="json").json()
    assert (body["status"], body["decided_by"], body["decision_note"]) == (
        "active", {"id": analyst.pk, "username": "analyst", "display_name": analyst.get_full_name() or "analyst"},
        "Yes")
    body = client.post(f"/api/v1/memory/{memory.pk}/forget/", {"reason": "Changed my mind"}, format="json").json()
    assert body["status"] == "forgotten" and memory_row(memory)[2] == "Changed my mind"


def test_an_analyst_cannot_confirm_someone_elses_memory_and_nothing_changes(api, analyst, analyst_b, tenant):
    memory = _memory(tenant, f"user:{analyst_b.pk}")
    with assert_nothing_changed(extra={"memory": lambda: memory_row(memory)}):
        response = api(analyst).post(f"/api/v1/memory/{memory.pk}/confirm/", {}, format="json")
    assert "Only the person the memory is about" in assert_error(response, 403, "forbidden")["detail"]


def test_an_expired_memory_cannot_be_confirmed_and_nothing_changes(api, analyst, tenant):
    memory = _memory(tenant, f"user:{analyst.pk}")
    MemoryRecord.objects.filter(pk=memory.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert api(analyst).get(f"/api/v1/memory/{memory.pk}/").json()["is_expired"] is True
    with assert_nothing_changed(extra={"memory": lambda: memory_row(memory)}):
        response = api(analyst).post(f"/api/v1/memory/{memory.pk}/confirm/", {}, format="json")
    assert_error(response, 409, "not_allowed")


def test_forgetting_twice_is_refused_and_nothing_changes(api, analyst, tenant):
    memory = _memory(tenant, f"user:{analyst.pk}")
    services.memory_forget(actor=analyst, memory=memory)
    with assert_nothing_changed(extra={"memory": lambda: memory_row(memory)}):
        response = api(analyst).post(f"/api/v1/memory/{memory.pk}/forget/", {}, format="json")
    assert_error(response, 409, "not_allowed")
    assert MemoryRecord.objects.get(pk=memory.pk).status == MemoryStatus.REJECTED


def test_memory_is_tenant_scoped(api, outsider, analyst, tenant):
    memory = _memory(tenant, f"user:{analyst.pk}")
    client = api(outsider)
    assert len(client.get("/api/v1/memory/").json()["results"]) == 0
    with assert_nothing_changed(extra={"memory": lambda: memory_row(memory)}):
        assert_error(client.get(f"/api/v1/memory/{memory.pk}/"), 404, "not_found")
        assert_error(client.post(f"/api/v1/memory/{memory.pk}/confirm/", {}, format="json"), 404, "not_found")
        assert_error(client.post(f"/api/v1/memory/{memory.pk}/forget/", {}, format="json"), 404, "not_found")


def test_the_schema_lists_the_runs_and_memory_endpoints(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    text = (tmp_path / "schema.yml").read_text()
    for path in ("/api/v1/runs/:", "/api/v1/runs/{id}/steps/{sequence}/model-calls/:", "/api/v1/runs/{id}/fork/:",
                 "/api/v1/memory/{id}/confirm/:", "RunStatusEnum", "EffectTypeEnum"):
        assert path in text, path


def test_a_budget_with_a_field_it_does_not_declare_is_a_400_and_changes_nothing(api, analyst, case):
    with assert_nothing_changed(case, extra=rows()):
        response = api(analyst).post("/api/v1/runs/", {"case": case.reference, "budget": {"max_steps": 5,
                                                                                          "steps": 5}}, format="json")
    body = assert_error(response, 400, "invalid", fields={"budget"})
    assert "steps" in body["fields"]["budget"]
