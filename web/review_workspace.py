"""The review workspace: the inbox list and the selected item side by side.

The list merges the page's proposals and notices, oldest first, and folds the pending proposals one
agent run made on one case into a single row ("3 proposals from run R12"). Each row has a key the
URL and the keyboard use: "p<pk>" a proposal, "n<pk>" a notice, "g<pk>" a run's group (named by its
first proposal). The reading pane shows the selected row: a proposal's change from → to, its
rationale and the quotes it cites marked in their evidence; a notice's text (diffed against the
version a supervisor saw), the notice checker's flags; a notice whose delivery is unknown, the
settle form. Decisions go through cases.services only (web.views.review_decide)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cases import selectors
from cases.models import NoticeStatus, ProposalStatus
from web.case_page import proposal_change, rationale_parts, stale_words
from web.evidence_preview import agent_reasons, display_text, preview


@dataclass
class Row:
    """One row of the list: a proposal, a notice, or a run's sibling proposals."""

    key: str
    kind: str  # "proposal", "group" or "notice"
    items: list
    created_at: object
    case: object
    may_decide: bool = False
    siblings: list = field(default_factory=list)

    @property
    def first(self):
        return self.items[0]

    @property
    def next_due(self):
        """The one due date the row shows: the earliest not met (the others are on demand)."""
        due = [d for d in getattr(self.first, "deadlines", []) if d.state != "met"]
        return min(due, key=lambda d: d.due) if due else None

    @property
    def other_dues(self):
        shown = self.next_due
        return [d for d in getattr(self.first, "deadlines", []) if d.state != "met" and d is not shown]


def build_rows(proposals, notices) -> list[Row]:
    """The list's rows, oldest first: pending proposals of one run on one case become one group row."""
    rows: list[Row] = []
    groups: dict[tuple, Row] = {}
    for proposal in proposals:
        run_key = (str(proposal.run_id), proposal.case_id)
        if proposal.run_id and proposal.status == ProposalStatus.PENDING and run_key in groups:
            groups[run_key].items.append(proposal)
            continue
        row = Row(key=f"p{proposal.pk}", kind="proposal", items=[proposal], created_at=proposal.created_at,
                  case=proposal.case)
        if proposal.run_id and proposal.status == ProposalStatus.PENDING:
            groups[run_key] = row
        rows.append(row)
    for row in rows:
        if len(row.items) > 1:
            row.kind, row.key = "group", f"g{row.first.pk}"
        row.may_decide = any(getattr(p, "may_decide", False) for p in row.items)
    for notice in notices:
        rows.append(Row(key=f"n{notice.pk}", kind="notice", items=[notice], created_at=notice.created_at,
                        case=notice.case, may_decide=getattr(notice, "may_decide", False)))
    rows.sort(key=lambda r: (r.created_at, r.key))
    return rows


def row_for(rows: list[Row], key: str | None) -> Row | None:
    """The row named by `key`; a proposal's key also finds the group it is folded into."""
    if not key:
        return None
    for row in rows:
        if row.key == key or (row.kind == "group" and key in {f"p{p.pk}" for p in row.items}):
            return row
    return None


def row_after(rows: list[Row], key: str | None) -> str:
    """The key of the row after `key` (or before it, if it is the last): what to select once it is decided."""
    keys = [r.key for r in rows]
    if key not in keys:
        return ""
    index = keys.index(key)
    if index + 1 < len(keys):
        return keys[index + 1]
    return keys[index - 1] if index > 0 else ""


def pane_for(*, user, row: Row, usernames: dict[int, str]) -> dict:
    """What the reading pane shows for `row`, read for this user (tenant-scoped selectors)."""
    evidence = list(selectors.evidence_list_for_case(user=user, case=row.case).select_related("extraction"))
    context: dict = {"row": row, "case": row.case, "evidence": evidence,
                     "evidence_ids": ",".join(str(e.pk) for e in evidence)}
    if row.kind == "notice":
        notice = row.first
        notice.flags_current = notice.checked_hash == notice.content_hash
        notice.is_unsettled = notice.status in NoticeStatus.unsettled()
        notice.dispatch_or_none = getattr(notice, "dispatch", None) if notice.is_unsettled else None
        return context
    by_id = {e.pk: e for e in evidence}
    reasons = agent_reasons(tenant_id=row.case.tenant_id, proposals=row.items, evidence_ids=set(by_id))
    for proposal in row.items:
        proposal.run_number = int(proposal.run_id) if str(proposal.run_id or "").isdigit() else None
        proposal.change = proposal_change(proposal, usernames)
        proposal.stale_words = stale_words(proposal, usernames)
        proposal.rationale_short, proposal.rationale_detail = rationale_parts(
            proposal.rationale, by_agent=proposal.proposer_type == "agent")
        found = reasons.get(proposal.pk)
        proposal.cited = []
        for quote in (found.quotes if found is not None else []):
            item = by_id[quote.evidence_id]
            shown = preview(display_text(item), quote=quote.quote)
            proposal.cited.append({"quote": quote, "evidence": item, "preview": shown})
    context["decidable"] = [p for p in row.items if getattr(p, "may_decide", False)]
    return context
