"""Small graphs for executor tests, registered per test with the `test_graphs` fixture."""

from agents.schemas import ChatReply
from runs.graph import Graph, Node, NodeContext


def tick(ctx: NodeContext):
    count = ctx.get("count", 0) + 1
    ctx.set("count", count)
    ctx.note(f"tick {count}")
    ctx.observe({"count": count}, key=f"tick-{count}")
    if count >= int(ctx.input.get("n", 3)):
        return ctx.end(f"{count} ticks")
    return ctx.goto("tick")


LOOP = Graph(name="test_loop", version="1", start="tick", requires_case=False, nodes=(Node("tick", tick),))


def ask(ctx: NodeContext):
    if not ctx.get("asked"):
        ctx.set("asked", True)
        return ctx.wait("needs a person's answer")
    return ctx.end("answered")


WAIT = Graph(name="test_wait", version="1", start="ask", requires_case=False, nodes=(Node("ask", ask),))


def crash(ctx: NodeContext):
    return {}["missing"]


CRASH = Graph(name="test_crash", version="1", start="crash", requires_case=False, nodes=(Node("crash", crash),))


def chat(ctx: NodeContext):
    reply = ctx.call_model(schema=ChatReply, agent="chat",
                           extra_context={"thread": {"summary": None, "recent": []}, "question": "hi"})
    ctx.observe(reply)
    return ctx.end(reply.answer)


CHAT = Graph(name="test_chat", version="1", start="chat", requires_case=False, nodes=(Node("chat", chat),))


def tools(ctx: NodeContext):
    for index, call in enumerate(ctx.input.get("calls", [])):
        result = ctx.tool(call["tool"], action=call.get("action", f"call-{index}"), args=call.get("args", {}))
        ctx.observe({"ok": result.ok, "status": result.status, "error": result.error, "result": result.result},
                    key=f"call-{index}")
    return ctx.end("tools done")


TOOLS = Graph(name="test_tools", version="1", start="tools", requires_case=True, nodes=(Node("tools", tools),))


def chat_loop(ctx: NodeContext):
    reply = ctx.call_model(schema=ChatReply, agent="chat", extra_context={"question": "again?"})
    count = ctx.get("count", 0) + 1
    ctx.set("count", count)
    ctx.observe(reply, key=f"reply-{count}")
    return ctx.end("enough") if count >= 3 else ctx.goto("chat")


CHAT_LOOP = Graph(name="test_chat_loop", version="1", start="chat", requires_case=False,
                  nodes=(Node("chat", chat_loop),))


def refuse_at_commit(ctx: NodeContext):
    from core.errors import Invalid

    def write(step):
        raise Invalid("The thread was closed meanwhile.")

    ctx.finding(type="note", summary="would be written")
    ctx.on_commit(write)
    return ctx.end("done")


COMMIT_REFUSED = Graph(name="test_commit_refused", version="1", start="node", requires_case=False,
                       nodes=(Node("node", refuse_at_commit),))


def append(ctx: NodeContext):
    """The benchmark's null graph (bench/null_graph.py has the same node): each step appends
    ~500 bytes to an append-only list and bumps a counter, until input["n"] steps."""
    count = ctx.get("count", 0) + 1
    ctx.set("count", count)
    ctx.note(f"{count:06d} " + "x" * 493)
    return ctx.end("done") if count >= int(ctx.input.get("n", 3)) else ctx.goto("append")


APPEND = Graph(name="test_append", version="1", start="append", requires_case=False,
               nodes=(Node("append", append),))


def read_case(ctx: NodeContext):
    """Notes the case's title as the step sees it, for input["n"] steps."""
    ctx.note(ctx.case.title)
    return ctx.end("done") if len(ctx.state.notes) >= int(ctx.input.get("n", 3)) else ctx.goto("read_case")


READ_CASE = Graph(name="test_read_case", version="1", start="read_case", requires_case=True,
                  nodes=(Node("read_case", read_case),))
