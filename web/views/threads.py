"""Threads with the case assistant: the list, a thread's messages, posting, redaction, compaction.

Reads go through conversations.selectors (and the cases/runs selectors for what an answer cited
or created), writes through conversations.services, one call per action. Posting returns at once:
the answer is written by a chat run, and the page polls (htmx, every 2 seconds) while a reply is
pending, appending the answer when it arrives."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from cases import policy
from cases import selectors as case_selectors
from cases.models import Case
from conversations import selectors, services
from conversations.drift import cited_fact_drift
from conversations.models import Message, MessageRole, Thread
from core.actors import Actor
from core.errors import DomainError, NotFound
from runs import selectors as run_selectors
from runs.models import RunStatus
from web.access import member_required
from web.actors import actor_labels
from web.case_page import Outcome, case_page_context
from web.errors import add_to_form, error_context, status_for
from web.forms import ThreadCreateForm
from web.views.runs import answer_action, go_to, pinned_error, queue_facts

THREADS_PER_PAGE = 25
CASE_THREADS_SHOWN = 8
MESSAGES_SHOWN = 100


# --- forms ---------------------------------------------------------------------------------------

class ThreadListCreateForm(ThreadCreateForm):
    case = forms.CharField(label="About case (optional)", required=False, max_length=40,
                           help_text="A case reference, e.g. CASE-2026-000001. Without one the assistant can "
                                     "answer questions but cannot propose changes.")


class MessageForm(forms.Form):
    # No length limit here: conversations.services.message_post judges it and says the limit.
    content = forms.CharField(label="Your message", strip=False,
                              widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Ask about the case, or ask "
                                                           "for a change: it becomes a proposal for approval."}),
                              error_messages={"required": "Write something to send."})


class RedactForm(forms.Form):
    reason = forms.CharField(label="Why redact it", required=False, max_length=500)


# --- reading -------------------------------------------------------------------------------------

def _thread(request, pk: int) -> Thread:
    return selectors.thread_get_for_user(user=request.user, pk=pk)


def _case(request, reference: str) -> Case:
    return case_selectors.case_get_for_user(user=request.user, reference=reference)


def may_chat(user) -> bool:
    return user.role in services.CAN_CHAT


def _approval_note(*, roles, requested_by: str, me: str, role: str) -> str:
    who = " or ".join(f"a {name}" if name[0] not in "aeiou" else f"an {name}" for name in sorted(roles))
    note = f"Approval required by {who}."
    if requested_by == me:
        note += " Not by you: you asked for it (four eyes)." if role in roles else ""
    return note


def decorate_messages(request, thread: Thread, items: list[Message], outcome: Outcome | None = None) -> dict:
    """Attach to each message what the page shows beside it: author label, redaction, what an
    answer cited (with a drift marker from conversations.drift) and the proposals, notice drafts
    and memory it created (with who must approve). A fixed number of queries for any number of
    messages. Returns the actor labels."""
    user = request.user
    me = Actor.for_user(user).identifier
    proposal_ids, notice_ids, memory_ids = set(), set(), set()
    for message in items:
        meta = message.metadata or {}
        proposal_ids.update(meta.get("proposal_ids") or [])
        notice_ids.update(meta.get("notice_ids") or [])
        memory_ids.update(meta.get("memory_ids") or [])
    proposals = {p.pk: p for p in case_selectors.proposal_list_for_user(user=user).filter(pk__in=proposal_ids)} \
        if proposal_ids else {}
    notices = {n.pk: n for n in case_selectors.notice_list_for_user(user=user).filter(pk__in=notice_ids)} \
        if notice_ids else {}
    memories = {m.pk: m for m in run_selectors.memory_list_for_user(user=user).filter(pk__in=memory_ids)} \
        if memory_ids else {}
    cites = any(m.role == MessageRole.ASSISTANT and m.cited_case_version is not None for m in items)
    drifted = {d.message_id: d for d in cited_fact_drift(tenant_id=user.tenant_id, thread_id=thread.pk)} \
        if cites and thread.case_id else {}
    identifiers = {m.author_id for m in items} | {m.redaction.redacted_by for m in items if m.is_redacted}
    labels = actor_labels(tenant_id=thread.tenant_id, identifiers=identifiers)
    may_redact_any = user.role in services.CAN_REDACT_ANY
    case = thread.case
    for message in items:
        meta = {} if message.is_redacted else (message.metadata or {})
        message.cited = (message.metadata or {}).get("cited") or {}
        message.drift = drifted.get(message.pk)
        message.case_changed_since = bool(
            case is not None and message.cited_case_version is not None and message.drift is None
            and (message.cited_case_version != case.version or message.cited_case_status != case.status))
        message.created_proposals = [proposals[i] for i in meta.get("proposal_ids") or [] if i in proposals]
        for proposal in message.created_proposals:
            proposal.approval_note = _approval_note(roles=policy.CAN_APPROVE_PROPOSALS,
                                                    requested_by=proposal.requested_by, me=me, role=user.role)
        message.created_notices = [notices[i] for i in meta.get("notice_ids") or [] if i in notices]
        for notice in message.created_notices:
            notice.approval_note = _approval_note(roles=policy.CAN_APPROVE_NOTICES,
                                                  requested_by=notice.requested_by, me=me, role=user.role) \
                + " Then a person sends it; the assistant never sends."
        message.created_memories = [memories[i] for i in meta.get("memory_ids") or [] if i in memories]
        message.may_redact = not message.is_redacted and (message.author_id == me or may_redact_any)
        key = f"redact:{message.pk}"
        message.redact_form = outcome.form if outcome is not None and outcome.target == key and outcome.form \
            else RedactForm(auto_id=f"id_redact{message.pk}_%s")
        message.error = pinned_error(outcome, key)
    return labels


def pending_context(request, thread: Thread, *, after: int, is_latest: bool) -> dict:
    """The replies still being written, with where the next one stands (queued / running)."""
    pending = selectors.thread_pending_replies(thread=thread)
    waiting = [p for p in pending if p.is_waiting]
    first = None
    if waiting:
        run = run_selectors.run_get_for_user(user=request.user, pk=int(waiting[0].run_id))
        first = {"run": run, "queue": queue_facts(user=request.user, run=run)}
    return {"thread": thread, "pending": pending, "waiting": waiting, "first_waiting": first,
            "is_polling": bool(waiting) and is_latest, "after": after, "is_latest": is_latest}


def thread_page_context(request, thread: Thread, *, outcome: Outcome | None = None,
                        before: int | None = None) -> dict:
    user = request.user
    messages_qs = selectors.message_list_for_user(user=user, thread=thread)
    if before:
        messages_qs = messages_qs.filter(sequence__lt=before)
    items = list(messages_qs.order_by("-sequence")[:MESSAGES_SHOWN])[::-1]
    labels = decorate_messages(request, thread, items, outcome)
    summary = selectors.thread_latest_summary(thread=thread)
    last_sequence = items[-1].sequence if items else 0
    is_latest = before is None
    outcome = outcome or Outcome(target="")
    message_form = outcome.form if outcome.target == "post" and outcome.form is not None else MessageForm(
        auto_id="id_message_%s")
    # A refusal sits next to its form when the page shows it (people who may chat); else at the top.
    errors = {"post": pinned_error(outcome, "post"), "compact": pinned_error(outcome, "compact")} \
        if may_chat(user) else {}
    unplaced = error_context(outcome.error) if outcome.error is not None and not outcome.shown else None
    return {
        "thread": thread, "case": thread.case, "messages_shown": items, "labels": labels, "summary": summary,
        "has_earlier": bool(items) and items[0].sequence > 1, "earliest_shown": items[0].sequence if items else 0,
        "is_latest": is_latest, "may_chat": may_chat(user), "message_form": message_form, "errors": errors,
        "unplaced_error": unplaced, **pending_context(request, thread, after=last_sequence, is_latest=is_latest),
    }


def _before(request) -> int | None:
    value = request.GET.get("before", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


# --- pages ---------------------------------------------------------------------------------------

@member_required
def thread_list(request):
    """The tenant's threads (optionally of one case), and the form to open one."""
    user = request.user
    case = None
    reference = request.GET.get("case", "").strip()
    if reference:
        case = _case(request, reference)  # another tenant's or unknown case: 404
    form = ThreadListCreateForm(request.POST or None, auto_id="id_thread_%s",
                                initial={"case": reference} if reference else None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                about = form.cleaned_data["case"].strip()
                thread_case = _case(request, about) if about else None
                thread = services.thread_create(actor=user, tenant=user.tenant, case=thread_case,
                                                title=form.cleaned_data["title"])
            except NotFound:
                form.add_error("case", f"There is no case {about} in your organisation; check the reference.")
                status = 404
            except DomainError as error:
                add_to_form(form, error)
                status = status_for(error)
            else:
                messages.success(request, f"Thread “{thread.title}” opened. Ask the assistant anything.")
                return go_to(request, reverse("web:thread_detail", args=[thread.pk]))
    threads = selectors.thread_list_for_user(user=user, case=case).order_by("-created_at", "-id")
    page = Paginator(threads, THREADS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "web/threads/list.html", {
        "form": form, "page": page, "case": case, "may_chat": may_chat(user), "query": query.urlencode(),
    }, status=status)


@require_GET
@member_required
def case_threads(request, reference: str):
    """The threads about a case, for the case page (loaded with htmx)."""
    case = _case(request, reference)
    threads = list(selectors.thread_list_for_user(user=request.user, case=case)
                   .order_by("-created_at", "-id")[:CASE_THREADS_SHOWN + 1])
    return render(request, "web/threads/_case_threads.html", {
        "case": case, "threads": threads[:CASE_THREADS_SHOWN], "more_threads": len(threads) > CASE_THREADS_SHOWN,
    })


@require_POST
@member_required
def case_thread_create(request, reference: str):
    """"Start a thread about this case" (conversations.services.thread_create), then open it."""
    case = _case(request, reference)
    form = ThreadCreateForm(request.POST, auto_id="id_thread_%s")
    outcome, status = None, 400
    if form.is_valid():
        try:
            thread = services.thread_create(actor=request.user, tenant=request.user.tenant, case=case,
                                            title=form.cleaned_data["title"])
        except DomainError as error:
            add_to_form(form, error)
            outcome, status = Outcome(target="thread_new", error=error, form=form), status_for(error)
        else:
            messages.success(request, f"Thread “{thread.title}” opened about {case.reference}.")
            return go_to(request, reverse("web:thread_detail", args=[thread.pk]))
    else:
        outcome = Outcome(target="thread_new", form=form)
    fresh = _case(request, reference)
    template = "web/cases/_body.html" if request.htmx else "web/cases/detail.html"
    response = render(request, template, case_page_context(request, fresh, outcome), status=status)
    if request.htmx:
        response["HX-Reswap"] = "outerHTML show:#action-error:top"
    return response


@member_required
def thread_detail(request, pk: int):
    thread = _thread(request, pk)
    return render(request, "web/threads/detail.html", thread_page_context(request, thread, before=_before(request)))


@require_GET
@member_required
def thread_pending(request, pk: int):
    """Polled while a reply is pending: the messages written since `after` (appended to the list
    out of band) and the pending block, which stops polling once nothing is pending."""
    thread = _thread(request, pk)
    after_value = request.GET.get("after", "")
    after = int(after_value) if after_value.isdigit() else thread.last_sequence
    new = list(selectors.message_list_for_user(user=request.user, thread=thread, after_sequence=after,
                                               limit=MESSAGES_SHOWN))
    labels = decorate_messages(request, thread, new)
    context = pending_context(request, thread, after=new[-1].sequence if new else after, is_latest=True)
    return render(request, "web/threads/_poll.html", {**context, "new_messages": new, "labels": labels,
                                                       "case": thread.case, "may_chat": may_chat(request.user)})


def _render_thread(request, thread: Thread, *, outcome: Outcome | None = None, status: int = 200):
    fresh = _thread(request, thread.pk)
    template = "web/threads/_body.html" if request.htmx else "web/threads/detail.html"
    return render(request, template, thread_page_context(request, fresh, outcome=outcome), status=status)


def _thread_url(thread: Thread, anchor: str = "") -> str:
    return reverse("web:thread_detail", args=[thread.pk]) + anchor


@require_POST
@member_required
def message_post(request, pk: int):
    thread = _thread(request, pk)
    form = MessageForm(request.POST, auto_id="id_message_%s")

    def call():
        message = services.message_post(actor=request.user, thread=thread, content=form.cleaned_data["content"])
        return f"Message #{message.sequence} posted; the assistant is replying."

    return answer_action(request, target="post", form=form, call=call, page_url=_thread_url(thread),
                         render_page=lambda **kw: _render_thread(request, thread, **kw))


@require_POST
@member_required
def message_redact(request, pk: int, message_pk: int):
    thread = _thread(request, pk)
    message = selectors.message_get_for_user(user=request.user, pk=message_pk)
    if message.thread_id != thread.pk:
        raise NotFound("No such message in this thread.")
    form = RedactForm(request.POST, auto_id=f"id_redact{message_pk}_%s")

    def call():
        services.message_redact(actor=request.user, message=message, reason=form.cleaned_data["reason"])
        return (f"Message #{message.sequence} redacted: it reads “[redacted]” here and in every model context; "
                f"the audit log keeps that it happened.")

    return answer_action(request, target=f"redact:{message_pk}", form=form, call=call,
                         page_url=_thread_url(thread),
                         render_page=lambda **kw: _render_thread(request, thread, **kw))


@require_POST
@member_required
def thread_compact(request, pk: int):
    thread = _thread(request, pk)

    def call():
        run = services.thread_compact(actor=request.user, thread=thread)
        window = run.input or {}
        text = (f"Compaction run R{run.pk} is summarising turns {window.get('from_sequence', '?')}–"
                f"{window.get('to_sequence', '?')}; the originals stay visible here.")
        if run.status != RunStatus.QUEUED:
            text += f" (It is {run.get_status_display().lower()}.)"
        return text

    return answer_action(request, target="compact", form=None, call=call, page_url=_thread_url(thread),
                         render_page=lambda **kw: _render_thread(request, thread, **kw))

