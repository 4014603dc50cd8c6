"""Agent runs in the browser: the case page's agents section, the run list and the run inspector
(status, budget, lease, steps; per step what the model saw, the tool calls and the checkpoint).

Reads go through runs.selectors, writes through runs.services (one service call per action).
Which buttons appear is a courtesy; the services judge, and a refusal comes back next to the
action it came from with the status web.errors maps it to.

`answer_action` is the one way an action on these pages (and on the thread and memory pages)
answers: htmx requests get the page region re-read from the database (or an HX-Redirect), plain
form posts a redirect or the whole page with the refusal."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.forms import Form
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from cases import selectors as case_selectors
from cases.models import Case, Notice, Proposal
from core.errors import DomainError, Invalid, NotFound
from runs import selectors, services
from runs.graph import GRAPHS
from runs.models import AgentRun, RunStatus
from runs.retention import CheckpointPurged
from web.access import member_required
from web.actors import actor_labels
from web.case_page import Outcome, case_page_context
from web.errors import add_to_form, error_context, status_for
from web.keyset import keyset_page
from web.live import run_progress
from web.views.actions import answer_case_action  # the case page's one way to answer an action
from web.views.cases import is_partial

RUNS_PER_PAGE = 25
COUNT_LIMIT = 1000
CASE_RUNS_SHOWN = 10
CASE_ANALYSIS_GRAPH = "case_analysis"
POLL_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)


# --- forms ---------------------------------------------------------------------------------------

class RunFilterForm(forms.Form):
    status = forms.ChoiceField(label="Status", required=False, choices=[("", "Any status"), *RunStatus.choices])
    graph = forms.ChoiceField(label="Kind of run", required=False,
                              choices=[("", "Any kind"), *[(name, name.replace("_", " ")) for name in GRAPHS]])
    case = forms.CharField(label="Case reference", required=False, max_length=40,
                           widget=forms.TextInput(attrs={"placeholder": "CASE-2026-000001"}))


class RunCancelForm(forms.Form):
    reason = forms.CharField(label="Reason (optional)", required=False, max_length=500,
                             widget=forms.TextInput(attrs={"placeholder": "Why stop it"}))


class RunForkForm(forms.Form):
    # The select offers the checkpoints a fork can start from; any other number is the service's
    # to refuse (with a message that says which steps are possible).
    from_step = forms.IntegerField(label="Fork from the checkpoint after step", min_value=0,
                                   error_messages={"required": "Choose the step to fork from."})


# --- answering an action -----------------------------------------------------------------------------

def go_to(request, url: str):
    """Send the browser to `url`: a redirect for a plain post, HX-Redirect for htmx (a new page)."""
    if request.htmx:
        response = HttpResponse(status=200)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


def answer_action(request, *, target: str, form: Form | None, call: Callable[[], str | tuple[str, str]],
                  render_page: Callable[..., HttpResponse], page_url: str):
    """Validate `form`, run `call` (ONE service call) and answer.

    `call` returns the message to show, or (message, url) to send the person to another page (a
    fork, a new thread). `render_page(outcome=..., status=...)` renders the page region for htmx
    or the whole page, re-read from the database, so it shows what is true now. A refusal is
    pinned to `target` (the action it came from) and answered with its status."""
    outcome, status = None, 200
    if form is not None and not form.is_valid():
        outcome, status = Outcome(target=target, form=form), 400
    else:
        try:
            result = call()
        except DomainError as error:
            if form is not None and error.fields:
                add_to_form(form, error)
            outcome, status = Outcome(target=target, error=error, form=form), status_for(error)
        else:
            text, url = result if isinstance(result, tuple) else (result, page_url)
            messages.success(request, text)
            if url != page_url or not request.htmx:
                return go_to(request, url)
    response = render_page(outcome=outcome, status=status)
    if request.htmx and outcome is not None:
        response["HX-Reswap"] = "outerHTML show:#action-error:top"
    return response


def pinned_error(outcome: Outcome | None, target: str) -> dict | None:
    """The refusal (or invalid form) of the action `target`, for the template next to it."""
    if outcome is None or outcome.target != target:
        return None
    outcome.shown = True
    if outcome.error is not None:
        return error_context(outcome.error)
    return {"code": "invalid", "title": "Please correct the highlighted fields", "message": "", "next_step": "",
            "fields": {}}


# --- shared facts about runs ---------------------------------------------------------------------------

def may_manage_runs(user) -> bool:
    return user.role in services.CAN_MANAGE_RUNS


def queue_facts(*, user, run: AgentRun) -> dict:
    """Where a queued run stands (runs.selectors.run_queue_facts; `run` is already tenant-scoped)."""
    return selectors.run_queue_facts(run=run)


def _budget_rows(run: AgentRun) -> list[dict]:
    if run.started_at is None:
        elapsed = 0
    else:
        elapsed = int(((run.finished_at or timezone.now()) - run.started_at).total_seconds())
    rows = [("Steps", run.steps_used, run.max_steps, ""), ("Model tokens", run.tokens_used, run.max_tokens, ""),
            ("Wall time", elapsed, run.max_wall_seconds, "s")]
    return [{"label": label, "used": used, "limit": limit, "unit": unit,
             "percent": min(100, round(100 * used / limit)) if limit else 0,
             "is_exhausted": used >= limit} for label, used, limit, unit in rows]


def _lease(run: AgentRun) -> dict:
    now = timezone.now()
    expires = run.lease_expires_at
    if run.lease_owner:
        return {"state": "held" if expires and expires >= now else "expired", "owner": run.lease_owner,
                "expires_at": expires}
    return {"state": "free", "owner": "", "expires_at": expires if run.status == RunStatus.RUNNING else None,
            "is_overdue": bool(expires and expires < now and run.status == RunStatus.RUNNING)}


def _may_resume(run: AgentRun) -> bool:
    if run.status in (RunStatus.WAITING, RunStatus.FAILED):
        return True
    # A running run whose worker died (lease expired) or whose next step was never delivered.
    lease = _lease(run)
    return run.status == RunStatus.RUNNING and (lease["state"] == "expired" or lease.get("is_overdue", False))


# --- the case page's agents section ------------------------------------------------------------------

def _case(request, reference: str) -> Case:
    return case_selectors.case_get_for_user(user=request.user, reference=reference)


@require_GET
@member_required
def case_runs(request, reference: str):
    """The case's runs (the case page loads this section with htmx and polls it while a run is
    queued or running); without JavaScript the case page links to the run list instead."""
    case = _case(request, reference)
    runs = list(selectors.run_list_for_user(user=request.user, case=case)
                .filter(graph=CASE_ANALYSIS_GRAPH).order_by("-id")[:CASE_RUNS_SHOWN + 1])
    shown = runs[:CASE_RUNS_SHOWN]
    for run in shown:
        run.queue = queue_facts(user=request.user, run=run) if run.status == RunStatus.QUEUED else None
        run.progress = run_progress(run)
    is_live = any(run.status in POLL_STATUSES for run in shown)
    context = {"case": case, "runs": shown, "more_runs": len(runs) > CASE_RUNS_SHOWN, "is_live": is_live}
    watched = [int(pk) for pk in request.GET.getlist("watch") if pk.isdigit()]
    if request.htmx and watched and not is_live:
        # The runs this page was watching have ended: say how, and refresh the sections they
        # write to (proposals, notices) out of band, without a reload.
        for run in shown:
            if run.pk in watched:
                _tell_how_it_ended(request, run)
        context |= case_page_context(request, case) | {"refresh_sections": True}
    return render(request, "web/runs/_case_runs.html", context)


def _tell_how_it_ended(request, run: AgentRun) -> None:
    if run.status == RunStatus.COMPLETED:
        messages.success(request, f"Analysis R{run.pk} finished: its proposals and notices are below, waiting for "
                                  f"a person's decision.")
    elif run.status == RunStatus.FAILED:
        messages.error(request, f"Analysis R{run.pk} failed: {run.error or 'see the run for why'}. Open it to resume.")
    elif run.status == RunStatus.CANCELLED:
        messages.warning(request, f"Analysis R{run.pk} was cancelled.")
    elif run.status == RunStatus.WAITING:
        messages.warning(request, f"Analysis R{run.pk} is waiting: {run.wait_reason or 'open it to see why'}.")


@require_POST
@member_required
def case_analyse(request, reference: str):
    """"Analyse with agents": start a case_analysis run (runs.services.run_start), answered like
    every case-page action (web.views.actions.answer_case_action)."""
    case = _case(request, reference)

    def call():
        run = services.run_start(actor=request.user, case=case, graph=CASE_ANALYSIS_GRAPH)
        queue = queue_facts(user=request.user, run=run)
        text = f"Analysis R{run.pk} queued"
        if queue["cap_reached"]:
            text += (f" at position {queue['position']}: your organisation already has {queue['running']} runs in "
                     f"progress (at most {queue['cap']} at once); it starts when one finishes.")
        elif queue["position"] and queue["position"] > 1:
            text += f" at position {queue['position']}; it starts after the runs ahead of it."
        else:
            text += "; it starts as soon as a worker picks it up."
        return text + " The agents propose; nothing changes on the case until a person approves."

    return answer_case_action(request, case, target="runs_new", form=None, call=call, anchor="#agents")


# --- run list ----------------------------------------------------------------------------------------

@member_required
@vary_on_headers("HX-Request", "HX-Target")
def run_list(request):
    form = RunFilterForm(request.GET)
    # An unknown value in a hand-edited URL is ignored, and the page says so; the valid ones apply.
    status = 200 if form.is_valid() else 400
    filters = form.cleaned_data
    case = None
    reference = (filters.get("case") or "").strip()
    case_error = ""
    if reference:
        try:
            case = _case(request, reference)
        except NotFound:
            case_error, status = f"No case {reference} in your organisation; showing runs of all cases.", 400
    runs = selectors.run_list_for_user(user=request.user, case=case, status=filters.get("status") or None)
    if filters.get("graph"):
        runs = runs.filter(graph=filters["graph"])
    try:  # keyset pages: as fast on the 400th page as on the first
        page = keyset_page(runs, key="pk", descending=True, cursor=request.GET.get("after"),
                           before=request.GET.get("before"), size=RUNS_PER_PAGE)
    except Invalid as error:
        case_error, status = error.message, 400
        page = keyset_page(runs, key="pk", descending=True, size=RUNS_PER_PAGE)
    total = runs.order_by()[:COUNT_LIMIT + 1].count()
    for run in page:
        # Bounded by the page size, and only queued rows ask.
        run.queue_position = selectors.run_queue_position(run=run) if run.status == RunStatus.QUEUED else None
    labels = actor_labels(tenant_id=request.user.tenant_id, identifiers={run.started_by for run in page})
    query = request.GET.copy()
    for key in ("page", "after", "before"):
        query.pop(key, None)
    context = {"form": form, "page": page, "labels": labels, "query": query.urlencode(), "case_error": case_error,
               "total": total, "total_is_capped": total > COUNT_LIMIT, "count_limit": COUNT_LIMIT,
               "is_filtered": any(filters.get(k) for k in ("status", "graph", "case"))}
    template = "web/runs/_results.html" if is_partial(request, "run-results") else "web/runs/list.html"
    return render(request, template, context, status=status)


# --- run inspector -----------------------------------------------------------------------------------

def _run(request, pk: int) -> AgentRun:
    return selectors.run_get_for_user(user=request.user, pk=pk)


def link_tool_calls(tool_calls, *, proposals, notices) -> None:
    """Point each tool call at the proposal or notice it made (its external ref), for a link."""
    targets = {f"proposal:{p.pk}": p for p in proposals} | {f"notice:{n.pk}": n for n in notices}
    for call in tool_calls:
        call.target = targets.get(call.external_ref)
        call.target_anchor = call.external_ref.replace(":", "-")


def run_page_context(request, run: AgentRun, outcome: Outcome | None = None) -> dict:
    user = request.user
    produced = _inspector_outcome(request, run)
    index = produced["step_index"]  # (pk, sequence, node, outcome) of every step: tuples, not objects
    steps = produced["steps"]  # the steps the page lists (STEPS_SHOWN, or all on request)
    by_step = {pk: sequence for pk, sequence, _node, _outcome in index}
    tool_counts: dict[int, int] = defaultdict(int)
    for call in produced["tool_calls"]:
        tool_counts[call.sequence] += 1
    for step in steps:
        step["tool_call_count"] = tool_counts.get(step["sequence"], 0)
    link_tool_calls(produced["tool_calls"], proposals=produced["proposals"], notices=produced["notices"])
    for item in (*produced["findings"], *produced["artifacts"]):
        item.step_sequence = by_step.get(item.step_id)
    forks = list(selectors.run_list_for_user(user=user).filter(parent_run=run).order_by("id"))
    # One label per option, built once (the template used to loop over every step for every option:
    # 1,000,000 iterations for a 1,000-step run).
    goto = [(sequence, node) for _pk, sequence, node, outcome in index if outcome == "goto"]
    fork_choices = [0, *[sequence for sequence, _node in goto]]
    fork_options = [(0, "0 — the start"), *[(sequence, f"{sequence} — after {node}") for sequence, node in goto]]
    shown_steps, steps_window = steps, produced["steps_window"]
    identifiers = {run.started_by} | {a.produced_by for a in produced["artifacts"]} \
        | {p.proposer_id for p in produced["proposals"]} | {n.drafted_by for n in produced["notices"]} \
        | {c.actor_id for c in produced["tool_calls"]}
    labels = actor_labels(tenant_id=run.tenant_id, identifiers=identifiers)
    may_manage = may_manage_runs(user)
    outcome = outcome or Outcome(target="")
    fork_form = outcome.form if outcome.target == "fork" and outcome.form is not None else RunForkForm(
        initial={"from_step": fork_choices[-1]}, auto_id="id_fork_%s")
    cancel_form = outcome.form if outcome.target == "cancel" and outcome.form is not None else RunCancelForm(
        auto_id="id_cancel_%s")
    # A refusal sits next to its action when the page shows the actions; otherwise at the top.
    errors = {name: pinned_error(outcome, name) for name in ("cancel", "resume", "fork")} if may_manage else {}
    return {
        "run": run,
        "progress": run_progress(run),
        "is_live": run.status in POLL_STATUSES,
        "queue": queue_facts(user=user, run=run),
        "budget": _budget_rows(run),
        "lease": _lease(run),
        "steps": steps,
        "steps_count": len(index),
        "shown_steps": shown_steps,
        "steps_window": steps_window,
        "findings": produced["findings"],
        "artifacts": produced["artifacts"],
        "proposals": produced["proposals"],
        "notices": produced["notices"],
        "tool_calls": produced["tool_calls"],
        "forks": forks,
        "labels": labels,
        "may_manage": may_manage,
        "may_cancel": may_manage and not run.is_finished,
        "may_resume": may_manage and _may_resume(run),
        "may_fork": may_manage and bool(index),
        "fork_choices": fork_choices,
        "fork_options": fork_options,
        "fork_form": fork_form,
        "cancel_form": cancel_form,
        "errors": errors,
        "unplaced_error": error_context(outcome.error) if outcome.error is not None and not outcome.shown else None,
    }


STEPS_SHOWN = 50


STEP_FIELDS = ("id", "sequence", "node", "attempt", "status", "outcome", "next_node", "summary", "error", "tokens",
               "started_at", "duration_ms", "copied_from_id")


def _inspector_outcome(request, run: AgentRun) -> dict:
    """What the inspector shows of a run (runs.selectors.run_outcome, without building a model
    object per step of a long run): every step as a small dict (one query), of which the page lists
    the STEPS_SHOWN latest (all of them with ?steps=all). `run` is already tenant-scoped."""
    rows = list(run.steps.order_by("sequence").values(*STEP_FIELDS))
    index = [(row["id"], row["sequence"], row["node"], row["outcome"]) for row in rows]
    show_all = request.GET.get("steps") == "all"
    if not show_all and len(rows) > STEPS_SHOWN:
        shown = rows[-STEPS_SHOWN:]
        window = {"is_partial": True, "total": len(rows), "first": shown[0]["sequence"],
                  "last": shown[-1]["sequence"], "show_all": False}
    else:
        shown, window = rows, {"is_partial": False, "total": len(rows), "show_all": show_all}
    run_key = str(run.pk)
    return {
        "step_index": index, "steps": shown, "steps_window": window,
        "findings": list(run.findings.order_by("id")),
        "artifacts": list(run.artifacts.order_by("id")),
        "proposals": list(Proposal.objects.filter(tenant_id=run.tenant_id, run_id=run_key).order_by("id")),
        "notices": list(Notice.objects.filter(tenant_id=run.tenant_id, run_id=run_key).order_by("id")),
        "tool_calls": list(run.tool_calls.order_by("id")),
    }


def _render_run(request, run: AgentRun, *, outcome: Outcome | None = None, status: int = 200):
    fresh = _run(request, run.pk)
    template = "web/runs/_body.html" if request.htmx else "web/runs/detail.html"
    return render(request, template, run_page_context(request, fresh, outcome), status=status)


@member_required
@vary_on_headers("HX-Request", "HX-Target")
def run_detail(request, pk: int):
    run = _run(request, pk)
    if is_partial(request, "run-live"):
        # The live block polls while the run is queued or running. Once it has finished, reload
        # the page once: findings, artifacts, proposals and the actions change with it.
        if run.status not in POLL_STATUSES:
            response = HttpResponse(status=200)
            response["HX-Refresh"] = "true"
            return response
        return render(request, "web/runs/_live.html", run_page_context(request, run))
    return render(request, "web/runs/detail.html", run_page_context(request, run))


@require_POST
@member_required
def run_cancel(request, pk: int):
    run = _run(request, pk)
    form = RunCancelForm(request.POST, auto_id="id_cancel_%s")

    def call():
        cancelled = services.run_cancel(actor=request.user, run=run, reason=form.cleaned_data["reason"].strip())
        if cancelled.status == RunStatus.CANCELLED:
            return f"Run R{run.pk} cancelled. What it produced so far stays recorded."
        return f"Run R{run.pk} stops when its current step ends; that step's work is kept."

    return answer_action(request, target="cancel", form=form, call=call, page_url=_run_url(run),
                         render_page=lambda **kw: _render_run(request, run, **kw))


@require_POST
@member_required
def run_resume(request, pk: int):
    run = _run(request, pk)

    def call():
        resumed = services.run_resume(actor=request.user, run=run)
        return (f"Run R{run.pk} resumes from its last checkpoint at step {resumed.next_sequence}; it is "
                f"{resumed.get_status_display().lower()}.")

    return answer_action(request, target="resume", form=None, call=call, page_url=_run_url(run),
                         render_page=lambda **kw: _render_run(request, run, **kw))


@require_POST
@member_required
def run_fork(request, pk: int):
    run = _run(request, pk)
    form = RunForkForm(request.POST, auto_id="id_fork_%s")

    def call():
        step = form.cleaned_data["from_step"]
        fork = services.run_fork(actor=request.user, run=run, from_sequence=step)
        where = "from the start" if step == 0 else f"after step {step}"
        return (f"Run R{fork.pk} forked from R{run.pk} {where}: it reproduces those steps and runs the rest "
                f"afresh. R{run.pk} stays as it was.", _run_url(fork))

    return answer_action(request, target="fork", form=form, call=call, page_url=_run_url(run),
                         render_page=lambda **kw: _render_run(request, run, **kw))


def _run_url(run: AgentRun) -> str:
    return reverse("web:run_detail", args=[run.pk])


# --- one step: what the model saw, the tools, the checkpoint -----------------------------------------

# A block as agents.context.render_messages writes it: the opening tag (with attributes) on its own
# line, the data, the closing tag on its own line. Data cannot contain either tag (the renderer
# escapes "<untrusted_" and "</untrusted_"), and the rules in the system message only mention
# the tags inline, so they are not taken for blocks.
UNTRUSTED_BLOCK = re.compile(r"<(untrusted_\w+)(?:\s[^>\n]*)?>\n.*?\n</\1>", re.DOTALL)


def message_segments(text: str) -> list[dict]:
    """Split a rendered prompt into plain text and the <untrusted_...> blocks, so the page can
    show the untrusted data visibly marked (as the model was told to treat it)."""
    segments: list[dict] = []
    position = 0
    text = text or ""
    for match in UNTRUSTED_BLOCK.finditer(text):
        if match.start() > position:
            segments.append({"text": text[position:match.start()], "is_untrusted": False})
        segments.append({"text": match.group(0), "is_untrusted": True,
                         "kind": match.group(1).removeprefix("untrusted_")})
        position = match.end()
    if position < len(text):
        segments.append({"text": text[position:], "is_untrusted": False})
    return segments


@member_required
def run_step_detail(request, pk: int, sequence: int):
    run = _run(request, pk)
    produced = selectors.run_outcome(run=run)
    steps = produced["steps"]
    step = next((s for s in steps if s.sequence == sequence), None)
    model_calls = list(selectors.run_model_calls_at(run=run, sequence=sequence))
    if step is None and not model_calls:
        raise NotFound(f"Run R{run.pk} has no step {sequence}; its steps are 1 to {len(steps)}."
                       if steps else f"Run R{run.pk} has not executed a step yet.")
    for call in model_calls:
        call.rendered = [{"role": m.get("role", ""), "segments": message_segments(str(m.get("content", "")))}
                         for m in call.messages or []]
    try:
        state = selectors.run_state_at(run=run, sequence=sequence, whole=True)  # the page shows it all
    except CheckpointPurged as purged:  # retention removed it: show the rest of the step and say so
        state, state_purged = None, purged.message
    else:
        state_purged = ""
    state_is_this_step = state is not None and bool(state.completed_steps) \
        and state.completed_steps[-1].sequence == sequence
    tool_calls = [c for c in produced["tool_calls"] if c.sequence == sequence]
    step_id = step.pk if step else None
    findings = [f for f in produced["findings"] if step_id and f.step_id == step_id]
    artifacts = [a for a in produced["artifacts"] if step_id and a.step_id == step_id]
    link_tool_calls(tool_calls, proposals=produced["proposals"], notices=produced["notices"])
    labels = actor_labels(tenant_id=run.tenant_id, identifiers={c.actor_id for c in tool_calls}
                          | {a.produced_by for a in artifacts} | {run.started_by})
    sequences = [s.sequence for s in steps]
    may_manage = may_manage_runs(request.user)
    return render(request, "web/runs/step.html", {
        "run": run, "step": step, "sequence": sequence, "model_calls": model_calls, "tool_calls": tool_calls,
        "state": state.as_dict() if state is not None else None, "state_purged": state_purged,
        "state_is_this_step": state_is_this_step, "findings": findings,
        "artifacts": artifacts, "labels": labels, "steps": steps,
        "previous_step": max((s for s in sequences if s < sequence), default=None),
        "next_step": min((s for s in sequences if s > sequence), default=None),
        "may_fork_here": may_manage and step is not None and step.outcome == "goto",
        "fork_form": RunForkForm(initial={"from_step": sequence}, auto_id="id_fork_%s"),
    })
