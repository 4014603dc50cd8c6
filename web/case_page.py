"""Everything the case page shows, built in one place for the full page and for the htmx
partial an action answers with.

Which buttons appear is a courtesy to the person (a button that could only fail is not shown,
and where a rule hides one the page says why); the services remain the only judges, and a
refused action comes back here as `error` on the form or item it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

from django import forms
from django.conf import settings
from django.forms import Form
from django.http import HttpRequest
from django_fsm import can_proceed

from cases import policy, selectors
from cases.deadlines import case_deadline_states, notice_sent
from cases.models import (
    CASE_TRANSITIONS,
    PRECONDITION_LABELS,
    Case,
    CaseStatus,
    NoticeStatus,
    ProposalKind,
    ProposalStatus,
    is_settled,
)
from cases.services.case import TRANSITIONS_CONFIRMED_WITHOUT_NOTICE
from cases.services.deadlines import CAN_EXTEND_DEADLINES
from conversations.services import CAN_CHAT
from core.actors import Actor
from core.errors import DomainError
from runs.services import CAN_MANAGE_RUNS
from web.actors import actor_labels, tenant_users
from web.errors import error_context
from web.evidence_preview import CitedQuote, agent_reasons, display_text, parse_quote_key, preview
from web.forms import (
    REASON_LABELS,
    TRANSITION_LABELS,
    DecisionNoteForm,
    EvidenceFileForm,
    EvidenceTextForm,
    NoticeApproveForm,
    NoticeForm,
    NoticeRejectForm,
    ProposalCreateForm,
    ThreadCreateForm,
    TransitionForm,
)
from web.labels import label, words

TIMELINE_LIMIT = 200


class ProposalApproveForm(DecisionNoteForm):
    """Approve a proposal: carries the case version the approver saw (a change while the page was
    open is a conflict) and the evidence ids listed on the page (recorded on the approval)."""

    carries_seen_state = True  # after a refusal the page shows a fresh form with the current state

    expected_version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    evidence_seen = forms.RegexField(regex=r"^[0-9]*(,[0-9]+)*$", required=False, max_length=20000,
                                     widget=forms.HiddenInput)

    def evidence_ids(self) -> list[int]:
        raw = self.cleaned_data.get("evidence_seen") or ""
        return [int(part) for part in raw.split(",") if part]


@dataclass
class Outcome:
    """The result of a refused action, pinned to where it came from.

    `target` names the form or item: "transition:<name>", "evidence_text", "evidence_file",
    "proposal_new", "proposal:<pk>", "notice_new", "notice:<pk>". `form` is the bound form (with
    its errors) to show instead of a fresh one; `form_key` says which of the item's forms it is.
    `typed` is what the person wrote in a form that is shown fresh (one carrying the version or
    hash they saw, which must be the current one now)."""

    target: str
    error: DomainError | None = None
    form: Form | None = None
    form_key: str = ""
    typed: dict = field(default_factory=dict)  # text to carry into a fresh form (see web.views.actions)
    shown: bool = False  # set once the error found its place on the page


class DeadlineExtendForm(forms.Form):
    """A supervisor moves one due date later, with a reason (cases.services.case_deadline_extend)."""

    carries_seen_state = True

    deadline = forms.ChoiceField(choices=[("acknowledge", "Acknowledgement"), ("response", "Response"),
                                          ("close", "Final response")])
    until = forms.DateField(label="New due date", widget=forms.DateInput(attrs={"type": "date"}))
    reason = forms.CharField(max_length=5000, widget=forms.Textarea(attrs={"rows": 2}),
                             error_messages={"required": "Say why the date moves; it is recorded in the audit."})
    expected_version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)


def transitions_for(*, case: Case, role: str | None) -> list[dict]:
    """The transitions from the case's current status that this role may perform, each with the
    conditions still unmet (shown disabled, with the reason, rather than hidden)."""
    items = []
    without_notice = not notice_sent(case)
    for name in CASE_TRANSITIONS:
        if not policy.role_may_transition(role, name):
            continue
        transition = getattr(case, name)._django_fsm.get_transition(case.status)
        if transition is None:
            continue
        unmet = [getattr(condition, "hint", condition.__name__)
                 for condition in transition.conditions if not condition(case)]
        items.append({
            "name": name,
            "label": TRANSITION_LABELS[name],
            "needs_reason": name in policy.TRANSITIONS_REQUIRING_REASON,
            "reason_label": REASON_LABELS.get(name, "Reason"),
            "unmet": unmet,
            "target_status": CaseStatus(transition.target).label,
            # Deciding/closing with no notice ever sent needs a confirmation with a reason.
            "needs_confirmation": without_notice and name in TRANSITIONS_CONFIRMED_WITHOUT_NOTICE,
        })
    return items


def case_page_context(request: HttpRequest, case: Case, outcome: Outcome | None = None) -> dict:
    user = request.user
    role = user.role
    actor = Actor.for_user(user)
    outcome = outcome or Outcome(target="")
    is_open = case.status != CaseStatus.CLOSED

    users = list(tenant_users(tenant_id=case.tenant_id))
    usernames = {u.pk: u.username for u in users}

    # Read first: whether a notice was sent decides the deadlines met and the confirmations asked.
    notices = list(selectors.notice_list_for_user(user=user, case=case)
                   .prefetch_related("approvals__approver").order_by("-created_at", "-id"))
    case.notice_sent = any(n.status == NoticeStatus.SENT for n in notices)

    transitions = _transitions_with_forms(case=case, role=role, outcome=outcome)

    # --- evidence ---------------------------------------------------------------------------
    evidence = list(selectors.evidence_list_for_case(user=user, case=case).select_related("extraction"))
    narrative = next((e for e in evidence if e.kind == "text" and e.title == selectors.NARRATIVE_TITLE), None)

    # --- proposals --------------------------------------------------------------------------
    proposals = list(selectors.proposal_list_for_user(user=user, case=case)
                     .select_related("proposed_by_user", "decided_by").order_by("-created_at", "-id"))
    _decorate_proposals(proposals, case=case, actor=actor, role=role, outcome=outcome, evidence=evidence,
                        usernames=usernames, is_open=is_open)
    marked, quote_note, marked_evidence = _cite_quotes(request, case=case, proposals=proposals, evidence=evidence,
                                                       narrative=narrative)
    may_propose = role in policy.CAN_PROPOSE
    proposal_form = _form_for(outcome, "proposal_new",
                              lambda: ProposalCreateForm(users=users, auto_id="id_proposal_%s",
                                                         initial={"kind": ProposalKind.RISK_LEVEL}))

    events = list(selectors.case_events_for_user(user=user, case=case).order_by("-sequence")[:TIMELINE_LIMIT])

    # --- notices ----------------------------------------------------------------------------
    may_draft = role in policy.CAN_DRAFT_NOTICES
    _decorate_notices(notices, events=events, actor=actor, role=role, outcome=outcome)
    notice_form = _form_for(outcome, "notice_new", lambda: NoticeForm(
        initial={"recipient": case.complainant_email}, auto_id="id_notice_%s"))

    # A section's error counts as shown only when the page renders that section's form.
    may_draft_now = may_draft and is_open

    return {
        "case": case,
        **_deadline_context(case=case, role=role, outcome=outcome),
        "lifecycle": CaseStatus.choices,
        "transitions": transitions,
        "evidence": evidence,
        "narrative": narrative,
        "marked_quote": marked,
        "marked_evidence": marked_evidence,
        "quote_note": quote_note,
        "quote_refused": marked is None and request.GET.get("quote") is not None,
        **_evidence_forms(role=role, outcome=outcome, is_open=is_open),
        "proposals": proposals,
        "pending_proposals": sum(1 for p in proposals if p.status == ProposalStatus.PENDING),
        "may_propose": may_propose,
        "proposal_form": proposal_form,
        "proposal_error": _error_for(outcome, "proposal_new") if may_propose else None,
        "notices": notices,
        "may_draft": may_draft_now,
        "notice_form": notice_form,
        "notice_error": _error_for(outcome, "notice_new") if may_draft_now else None,
        "events": events,
        "timeline_truncated": len(events) == TIMELINE_LIMIT,
        "labels": _labels(case=case, events=events, proposals=proposals, notices=notices, evidence=evidence,
                          usernames=usernames),
        "assignee_name": usernames.get(case.assignee_id, ""),
        "may_see_audit": user.can_see_audit,
        "action_error": error_context(outcome.error) if outcome.error is not None else None,
        # A refusal whose form is gone from the page now (e.g. a transition the case can no longer
        # take after someone else moved it) is shown at the top of the page instead.
        "unplaced_error": error_context(outcome.error) if outcome.error is not None and not outcome.shown else None,
        "outcome_target": outcome.target,
        **_agents_context(case=case, role=role, outcome=outcome),
    }


def _transitions_with_forms(*, case: Case, role: str, outcome: Outcome) -> list[dict]:
    """The transitions the role may take now, each with its form (the one refused, or a fresh one)."""

    transitions = transitions_for(case=case, role=role)
    for item in transitions:
        key = f"transition:{item['name']}"
        if outcome.target == key and outcome.form is not None:
            item["form"] = outcome.form
        else:
            item["form"] = TransitionForm(initial={"transition": item["name"], "expected_version": case.version,
                                                   **(outcome.typed if outcome.target == key else {})},
                                          auto_id=f"id_{item['name']}_%s")
        item["error"] = _error_for(outcome, key)
    return transitions


def _decorate_proposals(proposals: list, *, case: Case, actor: Actor, role: str, outcome: Outcome, evidence: list,
                        usernames: dict, is_open: bool) -> None:
    """What the page shows and allows for each proposal: four eyes, forms, words for the change."""
    may_decide_proposals = role in policy.CAN_APPROVE_PROPOSALS
    evidence_ids = ",".join(str(e.pk) for e in evidence)
    for proposal in proposals:
        key = f"proposal:{proposal.pk}"
        proposal.is_stale_now = proposal.status == ProposalStatus.STALE
        # Evidence added since the proposal was made does not make it stale; the approver sees it.
        proposal.evidence_since = [e for e in evidence if e.created_at > proposal.created_at]
        # Whoever proposed, or asked an agent to propose, cannot decide it (four eyes).
        proposal.is_own = actor.identifier in {proposal.proposer_id, proposal.requested_by}
        is_pending = proposal.status == ProposalStatus.PENDING
        proposal.may_decide = is_pending and may_decide_proposals and not proposal.is_own
        # Withdraw is the proposer's side taking it back (the service also lets a supervisor): a
        # supervisor who may decide it approves or rejects instead, so it is not offered beside those.
        proposal.may_withdraw = is_pending and not proposal.may_decide and (
            proposal.is_own or role == policy.SUPERVISOR)
        proposal.four_eyes_note = is_pending and may_decide_proposals and proposal.is_own
        proposal.approve_form = _item_form(outcome, key, "approve", lambda p=proposal, k=key: ProposalApproveForm(
            initial={"expected_version": case.version, "evidence_seen": evidence_ids,
                     **(outcome.typed if outcome.target == k else {})},
            auto_id=f"id_p{p.pk}_approve_%s"))
        proposal.may_reask = proposal.is_stale_now and role in CAN_MANAGE_RUNS and is_open
        proposal.reject_form = _item_form(outcome, key, "reject",
                                          lambda p=proposal: DecisionNoteForm(note_required=True,
                                                                              auto_id=f"id_p{p.pk}_reject_%s"))
        proposal.error = _error_for(outcome, key)
        proposal.payload_label = proposal_payload_label(proposal, usernames)
        proposal.change = proposal_change(proposal, usernames)
        proposal.stale_words = stale_words(proposal, usernames)
        proposal.rationale_short, proposal.rationale_detail = rationale_parts(
            proposal.rationale, by_agent=proposal.proposer_type == "agent")


def _cite_quotes(request: HttpRequest, *, case: Case, proposals: list, evidence: list, narrative):
    """The agents' cited quotes per proposal, the evidence previews, and the quote asked for in the
    URL marked in its evidence: (marked quote, a note about it, the evidence it is in)."""
    reasons = agent_reasons(tenant_id=case.tenant_id, proposals=proposals, evidence_ids={e.pk for e in evidence})
    quotes: dict[int, list[CitedQuote]] = {}
    for proposal in proposals:
        found = reasons.get(proposal.pk)
        proposal.cited_quotes = quotes[proposal.pk] = found.quotes if found is not None else []
        if found is not None and found.reasons and proposal.kind == ProposalKind.RISK_LEVEL:
            # An agent's risk proposal says first, in words, what the level rests on.
            proposal.rationale_short = (f"{proposal.change['to']} risk because of: "
                                       f"{'; '.join(r.rstrip('.') for r in found.reasons)}.")
            proposal.rationale_detail = proposal.rationale
    marked, quote_note = _marked_quote(request, quotes)
    evidence_by_id = {e.pk: e for e in evidence}
    for item in evidence:
        quote = marked.quote if marked is not None and marked.evidence_id == item.pk else ""
        item.preview = preview(display_text(item), quote=quote, mark_id="quote-mark" if quote else "",
                               whole=item is narrative)
        if quote and not item.preview.marked:
            quote_note = ("The quoted words were checked against the text as the agents read it (personal data "
                          "redacted), so they cannot be marked in the text shown here.")
    marked_evidence = evidence_by_id.get(marked.evidence_id) if marked is not None else None
    return marked, quote_note, marked_evidence


def _decorate_notices(notices: list, *, events: list, actor: Actor, role: str, outcome: Outcome) -> None:
    """What the page shows and allows for each notice: four eyes over every writer, forms, approvals."""
    # Everyone who wrote a version of a notice (not only the last editor) is barred from approving it.
    writers: dict[int, set[str]] = {}
    for event in events:
        if event.event_type in ("notice.drafted", "notice.edited"):
            writers.setdefault((event.payload or {}).get("notice_id"), set()).add(event.actor_id)
    may_draft = role in policy.CAN_DRAFT_NOTICES
    may_approve_notices = role in policy.CAN_APPROVE_NOTICES
    may_send = role in policy.CAN_DISPATCH_NOTICES
    for notice in notices:
        key = f"notice:{notice.pk}"
        is_author = actor.identifier in {notice.drafted_by, notice.last_edited_by, notice.requested_by,
                                         *writers.get(notice.pk, ())}
        notice.is_pending = notice.status == NoticeStatus.PENDING_APPROVAL
        notice.may_edit = may_draft and can_proceed(notice.edit)
        notice.may_submit = may_draft and notice.status == NoticeStatus.DRAFT
        notice.may_decide = notice.is_pending and may_approve_notices and not is_author
        notice.four_eyes_note = notice.is_pending and may_approve_notices and is_author
        # Beside Approve/Reject a supervisor decides; withdrawing stays with the drafting side.
        notice.may_withdraw = may_draft and can_proceed(notice.withdraw) and not notice.may_decide
        notice.may_send = may_send and notice.status in (NoticeStatus.APPROVED, NoticeStatus.FAILED)
        notice.valid_approval = next((a for a in notice.approvals.all()
                                      if a.is_valid and a.content_hash == notice.content_hash), None)
        notice.last_rejection = next((a for a in notice.approvals.all() if a.decision == "rejected"), None)
        notice.edit_form = _item_form(outcome, key, "edit", lambda n=notice: NoticeForm(
            initial={"recipient": n.recipient, "subject": n.subject, "body": n.body},
            auto_id=f"id_n{n.pk}_edit_%s"))
        notice.approve_form = _item_form(outcome, key, "approve", lambda n=notice, k=key: NoticeApproveForm(
            initial={"content_hash": n.content_hash, **(outcome.typed if outcome.target == k else {})},
            auto_id=f"id_n{n.pk}_approve_%s"))
        notice.reject_form = _item_form(outcome, key, "reject",
                                        lambda n=notice: NoticeRejectForm(auto_id=f"id_n{n.pk}_reject_%s"))
        notice.open_form = outcome.form_key if outcome.target == key and (outcome.form is not None
                                                                          or outcome.typed) else ""
        notice.error = _error_for(outcome, key)


def _labels(*, case: Case, events: list, proposals: list, notices: list, evidence: list, usernames: dict) -> dict:
    """Every actor the page names, in words."""
    identifiers = {e.actor_id for e in events} | {p.proposer_id for p in proposals} \
        | {p.requested_by for p in proposals} | {n.requested_by for n in notices} \
        | {e.added_by for e in evidence} | {n.drafted_by for n in notices} | {n.last_edited_by for n in notices} \
        | {f"user:{e.payload['assignee_id']}" for e in events if (e.payload or {}).get("assignee_id")}
    return actor_labels(tenant_id=case.tenant_id, identifiers=identifiers, usernames=usernames)


def _evidence_forms(*, role: str, outcome: Outcome, is_open: bool) -> dict:
    # A section's error counts as shown only when the page renders that section's form.
    may_add = role in policy.CAN_ADD_EVIDENCE and is_open
    return {
        "evidence_text_form": _form_for(outcome, "evidence_text", lambda: EvidenceTextForm(auto_id="id_text_%s")),
        "evidence_file_form": _form_for(outcome, "evidence_file", lambda: EvidenceFileForm(auto_id="id_file_%s")),
        "evidence_text_error": _error_for(outcome, "evidence_text") if may_add else None,
        "evidence_file_error": _error_for(outcome, "evidence_file") if may_add else None,
        "may_add_evidence": may_add,
        "evidence_max_bytes": settings.EVIDENCE_MAX_BYTES,
    }


def _deadline_context(*, case: Case, role: str, outcome: Outcome) -> dict:
    may_extend = role in CAN_EXTEND_DEADLINES
    return {
        "deadlines": case_deadline_states(case),
        "may_extend_deadlines": may_extend and not is_settled(case.status),
        "deadline_form": _form_for(outcome, "deadline_extend", lambda: DeadlineExtendForm(
            initial={"expected_version": case.version, **(outcome.typed if outcome.target == "deadline_extend"
                                                          else {})}, auto_id="id_deadline_%s")),
        "deadline_error": _error_for(outcome, "deadline_extend") if may_extend else None,
    }


def _agents_context(*, case: Case, role: str, outcome: Outcome) -> dict:
    """The agents and threads sections (their lists load from web.views.runs and web.views.threads)."""
    may_start_runs, may_chat = role in CAN_MANAGE_RUNS, role in CAN_CHAT
    return {
        "may_start_runs": may_start_runs,
        "runs_error": _error_for(outcome, "runs_new") if may_start_runs else None,
        "may_chat": may_chat,
        "thread_form": _form_for(outcome, "thread_new", lambda: ThreadCreateForm(
            initial={"title": f"Questions about {case.reference}"}, auto_id="id_thread_%s")),
        "thread_error": _error_for(outcome, "thread_new") if may_chat else None,
    }


def _error_for(outcome: Outcome, key: str) -> dict | None:
    if outcome.target != key:
        return None
    outcome.shown = True
    if outcome.error is not None:
        return error_context(outcome.error)
    if outcome.form is not None:  # the form itself was invalid (before any service call)
        return {"code": "invalid", "title": "Please correct the highlighted fields", "message": "",
                "next_step": "", "fields": {}}
    return None


def _form_for(outcome: Outcome, key: str, make):
    return outcome.form if outcome.target == key and outcome.form is not None else make()


def _item_form(outcome: Outcome, key: str, form_key: str, make):
    if outcome.target == key and outcome.form_key == form_key and outcome.form is not None:
        return outcome.form
    return make()


def _marked_quote(request: HttpRequest, quotes: dict[int, list[CitedQuote]]) -> tuple[CitedQuote | None, str]:
    """The cited quote named by `?quote=<proposal>.<index>` (a link on a proposal card), and a note
    for a person when the link names no quote on this page (an old or hand-edited link)."""
    raw = request.GET.get("quote")
    if raw is None:
        return None, ""
    parsed = parse_quote_key(raw)
    found = None
    if parsed is not None:
        listed = quotes.get(parsed[0], [])
        found = listed[parsed[1]] if parsed[1] < len(listed) else None
    if found is None:
        return None, "That link names a quote this case's proposals do not cite, so nothing is highlighted."
    return found, ""


def rationale_parts(rationale: str, *, by_agent: bool = True) -> tuple[str, str]:
    """(a short plain-language rationale, the rest). An agent's: its first paragraph, cut at a
    sentence end near 300 characters; the machine detail after it (signal codes, points, "Risk
    rationale: ...") is the rest, folded away on the card. A person's rationale is theirs: shown
    whole unless it is long (over 600 characters), then cut the same way."""
    text = (rationale or "").strip()
    if by_agent:
        first, _, rest = text.partition("\n")
        first, rest = first.strip(), rest.strip()
    else:
        first, rest = text, ""
    limit = 300 if by_agent else 600
    if len(first) > limit:
        cut = max(first.rfind(". ", 0, limit), first.rfind("; ", 0, limit))
        if cut > limit // 4:
            # Cut inside a list ("identity theft; repeated contact; …"): the card says the list goes on.
            shown = first[:cut + 1] if first[cut] == "." else first[:cut] + " …"
            first, rest = shown, (first[cut + 1:].strip() + ("\n" + rest if rest else "")).strip()
        else:
            first, rest = first[:limit - 20].rsplit(" ", 1)[0] + " …", text
    return first, rest


def _field_value(field_name: str, value, usernames: dict[int, str]) -> str:
    if value in (None, ""):
        return "nobody" if field_name in ("assignee_id", "assigned_team") else "—"
    if field_name == "status":
        return label(value, "case_status")
    if field_name == "risk_level":
        return label(value, "risk")
    if field_name == "assignee_id":
        return usernames.get(value, "a former member of staff")
    return str(value)


def stale_words(proposal, usernames: dict[int, str]) -> str:
    """Why a proposal is out of date, in words (Proposal.stale_message names stored values)."""
    reason = proposal.stale_reason or {}
    if not reason:
        return ""
    field_name = reason.get("field", "")
    what = PRECONDITION_LABELS.get(field_name, words(field_name).lower())
    before = _field_value(field_name, reason.get("from"), usernames)
    now = _field_value(field_name, reason.get("to"), usernames)
    return f"The {what} changed from {before} to {now} after this proposal was made; it assumed {before}."


def proposal_change(proposal, usernames: dict[int, str]) -> dict:
    """What the proposal changes, from → to, in words: the value it found when it was made (its
    precondition, ADR 0006) and the value it asks for."""
    before = proposal.preconditions or {}
    payload = proposal.payload or {}
    if proposal.kind == ProposalKind.STATUS_TRANSITION:
        name = payload.get("transition", "")
        target = ""
        if name in CASE_TRANSITIONS:
            meta = getattr(Case, name)._django_fsm
            transition = meta.get_transition(before.get("status")) or next(iter(meta.transitions.values()), None)
            target = CaseStatus(transition.target).label if transition is not None else ""
        return {"what": "Status", "from": label(before.get("status"), "case_status"),
                "to": target or TRANSITION_LABELS.get(name, words(name))}
    if proposal.kind == ProposalKind.RISK_LEVEL:
        return {"what": "Risk level", "from": label(before.get("risk_level"), "risk"),
                "to": label(payload.get("risk_level"), "risk")}

    def holder(team, assignee_id) -> str:
        parts = [f"team {team}"] if team else []
        if assignee_id:
            parts.append(usernames.get(assignee_id, "a former member of staff"))
        return " and ".join(parts) or "nobody"

    return {"what": "Assignment", "from": holder(before.get("assigned_team"), before.get("assignee_id")),
            "to": holder(payload.get("team"), payload.get("assignee_id"))}


def proposal_payload_label(proposal, usernames: dict[int, str]) -> str:
    payload = proposal.payload or {}
    if proposal.kind == ProposalKind.STATUS_TRANSITION:
        name = payload.get("transition", "")
        return f"Status: {TRANSITION_LABELS.get(name, name)}"
    if proposal.kind == ProposalKind.RISK_LEVEL:
        return f"Risk level → {str(payload.get('risk_level', '')).capitalize()}"
    parts = []
    if payload.get("team"):
        parts.append(f"team {payload['team']}")
    if payload.get("assignee_id"):
        parts.append(usernames.get(payload["assignee_id"], f"user #{payload['assignee_id']}"))
    return "Assign to " + (" and ".join(parts) or "—")
