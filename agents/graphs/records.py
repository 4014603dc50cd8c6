"""What every node of the case-analysis graph records the same way: the evidence a model was shown,
the next step of the plan, quotes dropped as unverifiable, text set aside as addressed to the
reviewer."""

from __future__ import annotations

from agents.graphs.guards import CaseText, instruction_summary
from runs.graph import NodeContext, NodeResult


def shown_evidence(ctx: NodeContext, refs) -> list[int]:
    """Keep only evidence ids the model was shown in this step's context (a model can invent ids)."""
    shown = {item["id"] for item in ctx.last_source_refs.get("evidence", [])}
    kept = []
    for ref in refs or []:
        try:
            value = int(ref)
        except (TypeError, ValueError):
            continue
        if value in shown and value not in kept:
            kept.append(value)
    return kept


def continue_plan(ctx: NodeContext) -> NodeResult:
    following = ctx.next_in_plan()
    return ctx.goto(following) if following else ctx.end("plan finished")


def record_dropped(ctx: NodeContext, agent: str, dropped: list[dict]) -> None:
    """An unverifiable quote is dropped from the output and recorded: a note in the run and a
    finding the case page shows, naming the evidence, the words and why they did not verify."""
    if not dropped:
        return
    lines = "; ".join(f"E{d['evidence_id']}: “{d['quote'][:120]}” ({d['reason']})" for d in dropped)
    ctx.note(f"{agent}: dropped {len(dropped)} quote(s) that do not occur in the cited evidence — {lines}")
    ctx.finding(type="unverified_citation", confidence=1.0, data={"dropped": dropped},
                summary=f"{agent}: {len(dropped)} quote(s) not found in the cited evidence were dropped: {lines}"[:2000])


def record_instructions(ctx: NodeContext, read: CaseText) -> None:
    """Text in the evidence addressed to the reviewer, the agents or the system becomes a finding
    of its own, quoted and attributed: it is data, and it changes nothing."""
    if not read.set_aside:
        return
    summary, items = instruction_summary(read)
    ctx.finding(type="evidence_instruction", confidence=1.0, summary=summary[:2000], data={"set_aside": items},
                evidence_refs=[item["evidence_id"] for item in items if item["evidence_id"] is not None])
