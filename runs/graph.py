"""The graph contract of the run engine: graphs of nodes, and the API a node sees (docs/runs-contract.md).

A graph module defines `GRAPH = Graph(...)` from `Node`s; a node is a plain function
`def node(ctx: NodeContext) -> NodeResult`. The executor (runs.executor.run_step) builds the
NodeContext, runs one node per step OUTSIDE any transaction, and then commits everything the node
buffered (findings, artifacts, model calls, state changes, `on_commit` writes) in one transaction
with the Step, the checkpoint, the audit event and the lease. Tool effects are the exception: they
commit through the tool executor (runs.tools) before the node continues, under an idempotency key.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from pydantic import BaseModel

from core.actors import Actor
from core.redaction import configured_redactor
from runs.model_calls import call_model_for_node
from runs.models import Finding
from runs.tools import tool_execute

if TYPE_CHECKING:
    from cases.models import Case
    from runs.models import AgentRun, Step
    from runs.state import RunState
    from runs.tools import ToolResult

# Graph name -> "module:attribute": settings.ARBITER_GRAPHS, so the engine names no graph of the
# agents package; a module adding a graph adds one line there.
GRAPHS: dict[str, str] = settings.ARBITER_GRAPHS

PHASES = ("planning", "executing", "reflecting", "done", "error")


class UnknownGraph(LookupError):
    pass


@dataclass(frozen=True)
class Node:
    name: str
    run: Callable[[NodeContext], NodeResult]
    version: str = "1"
    instructions: str = ""
    phase: str = "executing"


@dataclass(frozen=True)
class Graph:
    name: str
    version: str
    nodes: tuple[Node, ...]
    start: str
    requires_case: bool = True
    # Builds the run's goal text from (input, case); the default names the graph.
    goal: Callable[[dict, Any], str] | None = None
    # The initial plan (node names, head first); default: the start node only.
    plan: tuple[str, ...] = ()

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise UnknownGraph(f"Graph {self.name!r} has no node {name!r}.")

    def initial_goal(self, input: dict, case) -> str:
        if self.goal is None:
            return f"{self.name} run"
        # The goal is kept in the run's state and every checkpoint; a case title can hold personal
        # data, so the goal is redacted like everything a model reads.
        names = tuple(n for n in (getattr(case, "complainant_name", ""),) if n)
        return configured_redactor()(self.goal(input, case), names=names)

    def initial_plan(self) -> list[str]:
        return list(self.plan or (self.start,))

    @property
    def prompt_versions(self) -> dict[str, str]:
        return {node.name: node.version for node in self.nodes}


def get_graph(name: str) -> Graph:
    try:
        target = GRAPHS[name]
    except KeyError:
        raise UnknownGraph(f"Unknown graph {name!r}; known graphs: {', '.join(sorted(GRAPHS))}.") from None
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)


# --- what a node returns -------------------------------------------------------------------

@dataclass(frozen=True)
class NodeResult:
    kind: str  # "goto" | "end" | "wait"
    next_node: str | None = None
    reason: str = ""

    GOTO = "goto"
    END = "end"
    WAIT = "wait"


# --- what the executor collects from a node ------------------------------------------------

@dataclass
class PendingFinding:
    type: str
    summary: str
    evidence_refs: list[int]
    confidence: float
    contradicts: int | PendingFinding | None
    data: dict
    agent: str
    pk: int | None = None  # set once committed


@dataclass
class PendingArtifact:
    kind: str
    content: dict
    source_refs: dict
    schema_version: int
    produced_by: str
    # Findings this artifact is about (committed ids or pending findings of this step); stored as
    # content["finding_ids"] once the step commits (a dispute artifact names both sides).
    findings: list = field(default_factory=list)
    pk: int | None = None


@dataclass
class StepBuffer:
    """Everything a node produced that commits with its step."""

    findings: list[PendingFinding] = field(default_factory=list)
    artifacts: list[PendingArtifact] = field(default_factory=list)
    model_calls: list[dict] = field(default_factory=list)  # kwargs for runs.models.ModelCall
    tool_call_ids: list[int] = field(default_factory=list)
    on_commit: list[Callable[[Step], None]] = field(default_factory=list)
    tokens: int = 0


class NodeContext:
    """The only API a node uses. See docs/runs-contract.md for the contract."""

    def __init__(self, *, run: AgentRun, node: Node, sequence: int, attempt: int, state: RunState,
                 case: Case | None, provider, worker_id: str, heartbeat: Callable[[], None]):
        self.run = run
        self.node = node.name
        self.node_def = node
        self.sequence = sequence
        self.attempt = attempt
        self.state = state
        self.case = case
        self.thread_id = run.thread_id
        self.input = dict(run.input or {})
        self.actor = Actor.agent(node.name, node.version)
        self.provider = provider
        self.worker_id = worker_id
        self.buffer = StepBuffer()
        self._heartbeat = heartbeat
        self._last_source_refs: dict = {}

    # --- the model -----------------------------------------------------------------------
    def call_model(self, *, schema: type[BaseModel], agent: str | None = None,
                   extra_context: dict | None = None, instructions: str | None = None,
                   max_output_tokens: int = 1200, source_refs: dict | None = None) -> BaseModel:
        """Ask the run's model for a `schema` instance. `extra_context` keys join the context dict
        (chat: "thread", "question"); `source_refs` adds references the ModelCall records (e.g.
        message ids)."""
        output, used_refs = call_model_for_node(
            ctx=self, schema=schema, agent=agent or self.node, extra_context=extra_context or {},
            instructions=instructions if instructions is not None else self.node_def.instructions,
            max_output_tokens=max_output_tokens, extra_source_refs=source_refs)
        self._last_source_refs = used_refs
        return output

    @property
    def last_source_refs(self) -> dict:
        """The source refs of this step's latest model call (what that model was shown)."""
        return self._last_source_refs

    # --- side effects ----------------------------------------------------------------------
    def tool(self, name: str, *, action: str, args: dict | None = None) -> ToolResult:
        self._heartbeat()
        result = tool_execute(run=self.run, sequence=self.sequence, actor=self.actor, tool=name,
                              action=action, args=args or {})
        if result.tool_call_id and result.tool_call_id not in self.buffer.tool_call_ids:
            self.buffer.tool_call_ids.append(result.tool_call_id)
        return result

    def finding(self, *, type: str, summary: str, evidence_refs=(), confidence: float = 0.5,
                contradicts: int | PendingFinding | None = None, data: dict | None = None) -> PendingFinding:
        pending = PendingFinding(type=type, summary=summary[:2000], evidence_refs=[int(r) for r in evidence_refs],
                                 confidence=float(confidence), contradicts=contradicts, data=dict(data or {}),
                                 agent=self.node)
        self.buffer.findings.append(pending)
        return pending

    def artifact(self, *, kind: str, content: dict, source_refs: dict | None = None, schema_version: int = 1,
                 findings: list | None = None) -> PendingArtifact:
        pending = PendingArtifact(kind=kind, content=content,
                                  source_refs=dict(source_refs if source_refs is not None else self._last_source_refs),
                                  schema_version=schema_version, produced_by=self.actor.identifier,
                                  findings=list(findings or []))
        self.buffer.artifacts.append(pending)
        return pending

    def committed_findings(self, **filters):
        """This run's findings from earlier steps (a queryset), e.g. committed_findings(agent="triage")."""

        return Finding.objects.filter(run=self.run, **filters).order_by("id")

    def on_commit(self, fn: Callable[[Step], None]) -> None:
        self.buffer.on_commit.append(fn)

    def heartbeat(self) -> None:
        self._heartbeat()

    # --- checkpointed state ----------------------------------------------------------------
    def observe(self, output: BaseModel | dict, key: str | None = None) -> None:
        value = output.model_dump(mode="json") if isinstance(output, BaseModel) else dict(output)
        self.state.observations[key or self.node] = value

    def note(self, text: str) -> None:
        self.state.notes.append(str(text)[:1000])

    def get(self, key: str, default: Any = None) -> Any:
        return self.state.data.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.state.data[key] = value

    def set_plan(self, nodes: list[str]) -> None:
        self.state.plan = list(nodes)

    def next_in_plan(self) -> str | None:
        """The node planned after this one (the plan's head is the node running now)."""
        plan = self.state.plan
        rest = plan[1:] if plan and plan[0] == self.node else plan
        return rest[0] if rest else None

    # --- results ---------------------------------------------------------------------------
    def goto(self, node: str) -> NodeResult:
        return NodeResult(kind=NodeResult.GOTO, next_node=node)

    def end(self, summary: str = "") -> NodeResult:
        return NodeResult(kind=NodeResult.END, reason=summary)

    def wait(self, reason: str) -> NodeResult:
        return NodeResult(kind=NodeResult.WAIT, reason=reason)
