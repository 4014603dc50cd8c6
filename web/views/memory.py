"""Governed memory (agents propose, a person confirms) in the browser: what the agents may remember about a person, a case
or the organisation. Agents only propose; the person a memory is about (or a supervisor)
confirms or forgets it here, through runs.services.memory_confirm / memory_forget, which judge
(runs/memory.py). Only active, unexpired memory ever enters a model context."""

from __future__ import annotations

from django import forms
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from cases import policy
from core.errors import NotFound
from runs import selectors, services
from runs.models import MemoryRecord, MemoryStatus
from web.access import member_required
from web.actors import actor_labels
from web.case_page import Outcome
from web.errors import error_context
from web.views.runs import answer_action, pinned_error

MEMORIES_SHOWN = 200


class MemoryDecisionForm(forms.Form):
    note = forms.CharField(label="Note (optional)", required=False, max_length=1000)


def _subject_label(subject: str, *, me: str, labels: dict) -> str:
    if subject == me:
        return "you"
    if subject == "tenant":
        return "everyone in the organisation"
    kind, _, value = subject.partition(":")
    if kind == "case":
        return f"case {value}"
    return labels.get(subject, subject)


def memory_page_context(request, outcome: Outcome | None = None) -> dict:
    user = request.user
    me = f"user:{user.pk}"
    is_supervisor = user.role == policy.SUPERVISOR
    # A person sees what is remembered about them; a supervisor, who decides for everyone, sees all.
    memories = selectors.memory_list_for_user(user=user, subject=None if is_supervisor else me)
    memories = list(memories.select_related("decided_by").order_by("-created_at", "-id")[:MEMORIES_SHOWN + 1])
    truncated = len(memories) > MEMORIES_SHOWN
    memories = memories[:MEMORIES_SHOWN]
    labels = actor_labels(tenant_id=user.tenant_id, identifiers={m.proposed_by for m in memories}
                          | {m.subject for m in memories if m.subject.startswith("user:")})
    now = timezone.now()
    groups = {"proposed": [], "active": [], "expired": [], "closed": []}
    for memory in memories:
        memory.is_expired = memory.expires_at <= now
        memory.subject_label = _subject_label(memory.subject, me=me, labels=labels)
        memory.is_mine = memory.subject == me
        may_decide = memory.is_mine or is_supervisor
        memory.may_confirm = may_decide and memory.status == MemoryStatus.PROPOSED and not memory.is_expired
        memory.may_forget = may_decide and memory.status in (MemoryStatus.PROPOSED, MemoryStatus.ACTIVE)
        memory.error = pinned_error(outcome, f"memory:{memory.pk}")
        if memory.status in (MemoryStatus.REJECTED, MemoryStatus.FORGOTTEN):
            groups["closed"].append(memory)
        elif memory.is_expired:
            groups["expired"].append(memory)
        else:
            groups[memory.status].append(memory)
    unplaced = None
    if outcome is not None and outcome.error is not None and not outcome.shown:
        unplaced = error_context(outcome.error)
    return {"groups": groups, "labels": labels, "is_supervisor": is_supervisor, "truncated": truncated,
            "unplaced_error": unplaced}


@member_required
def memory_list(request):
    return render(request, "web/memory/list.html", memory_page_context(request))


def _render(request, *, outcome=None, status=200):
    template = "web/memory/_body.html" if request.htmx else "web/memory/list.html"
    return render(request, template, memory_page_context(request, outcome), status=status)


def _memory(request, pk: int) -> MemoryRecord:
    memory = selectors.memory_list_for_user(user=request.user).filter(pk=pk).first()
    if memory is None:
        raise NotFound("No such memory.")
    return memory


@require_POST
@member_required
def memory_confirm(request, pk: int):
    memory = _memory(request, pk)
    form = MemoryDecisionForm(request.POST, auto_id=f"id_m{pk}_confirm_%s")

    def call():
        services.memory_confirm(actor=request.user, memory=memory, note=form.cleaned_data["note"].strip())
        return (f"Memory M{pk} confirmed: agents use it until {memory.expires_at:%Y-%m-%d}, unless it is "
                f"forgotten before.")

    return answer_action(request, target=f"memory:{pk}", form=form, call=call, page_url=reverse("web:memory_list"),
                         render_page=lambda **kw: _render(request, **kw))


@require_POST
@member_required
def memory_forget(request, pk: int):
    memory = _memory(request, pk)
    form = MemoryDecisionForm(request.POST, auto_id=f"id_m{pk}_forget_%s")

    def call():
        forgotten = services.memory_forget(actor=request.user, memory=memory, reason=form.cleaned_data["note"].strip())
        verb = "rejected" if forgotten.status == MemoryStatus.REJECTED else "forgotten"
        return f"Memory M{pk} {verb}: no agent will use it. The record stays for the audit trail."

    return answer_action(request, target=f"memory:{pk}", form=form, call=call, page_url=reverse("web:memory_list"),
                         render_page=lambda **kw: _render(request, **kw))
