"""The step benchmark's null graph (bench/steps.py): one node looping `input["n"]` times, each
step appending ~500 bytes to an append-only list and bumping a counter — the same work the
LangGraph and plain-psycopg competitors do per step (bench/step_worker.py)."""

from runs.graph import Graph, Node, NodeContext

PAYLOAD = "x" * 493


def append(ctx: NodeContext):
    count = ctx.get("count", 0) + 1
    ctx.set("count", count)
    ctx.note(f"{count:06d} {PAYLOAD}")
    return ctx.end("done") if count >= int(ctx.input.get("n", 200)) else ctx.goto("append")


GRAPH = Graph(name="bench_null", version="1", start="append", requires_case=False, nodes=(Node("append", append),))
