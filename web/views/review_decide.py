"""Decisions taken in the review workspace's reading pane: approve or reject one item or a run's
sibling proposals, and settle a notice whose delivery is unknown.

Each item is decided by its own call of the service the case page uses (cases.services), in its
own transaction, run again on its own after a deadlock (web.retries): "approve these 3" is three
approvals, each bound to what the pane showed — a proposal to the case version it was shown
against, a notice to the content hash of the text shown — and a refusal of one names it and leaves
the others as they are. Nothing here re-checks a rule.

Sibling proposals of one run change the same case one after another, and each applied change moves
the case's version on. The version the second sibling is bound to is therefore the version the
case had right after the person's own first approval — read inside the same transaction as that
approval, while the service still holds the case's row lock, so a change anybody else made in
between is not absorbed: it is a conflict, as on the case page.

Answers: to htmx, the workspace (list and pane) with the next item selected and what happened said
in its status line; to a plain post, a redirect to the workspace (or, after a refusal, the page
with the refusal and its status)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib import messages
from django.db import transaction
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from cases import selectors, services
from cases.models import Case
from core.db import retry_on_deadlock
from core.errors import DomainError, Invalid
from web.access import member_required
from web.errors import status_for
from web.retries import retries_each_change
from web.views.review import workspace_context

_ITEM = re.compile(r"^(p):([0-9]{1,12}):([0-9]{1,9})$|^(n):([0-9]{1,12}):([0-9a-f]{64})$")
_EVIDENCE = re.compile(r"^[0-9]*(,[0-9]+)*$")


@dataclass
class Done:
    """What became of one item: `error` None when it was decided."""

    key: str
    name: str
    error: DomainError | None = None


def _parse_items(values: list[str]) -> list[tuple[str, int, str]]:
    parsed = []
    for value in values[:50]:
        match = _ITEM.match(value or "")
        if match is None:
            raise Invalid("The items to decide were not understood; reload the inbox and try again.",
                          fields={"item": ["Unknown item."]})
        kind, pk, seen = (match.group(1), match.group(2), match.group(3)) if match.group(1) else \
            (match.group(4), match.group(5), match.group(6))
        parsed.append((kind, int(pk), seen))
    if not parsed:
        raise Invalid("Choose what to decide.", fields={"item": ["Nothing chosen."]})
    return parsed


def _approve_proposal(request, proposal, expected_version: int, evidence_seen: list[int], note: str,
                      confirm_reason: str) -> int:
    """Approve through the service and return the case's version right after it (same transaction,
    the case row still locked by the service)."""
    with transaction.atomic():
        services.proposal_approve(actor=request.user, proposal=proposal, note=note,
                                  expected_version=expected_version, evidence_seen=evidence_seen,
                                  confirm_reason=confirm_reason)
        return Case.objects.filter(pk=proposal.case_id).values_list("version", flat=True).get()


def _resolve(user, items: list[tuple[str, int, str]]) -> list[tuple[str, object, str]]:
    """Every posted item read for this user before any is decided: one this tenant cannot see is a
    404 (NotFound) with nothing decided."""
    return [(kind, selectors.proposal_get_for_user(user=user, pk=pk) if kind == "p"
             else selectors.notice_get_for_user(user=user, pk=pk), seen) for kind, pk, seen in items]


@retry_on_deadlock
def _decide(request, kind: str, item, seen: str, *, action: str, note: str, confirm_reason: str,
            evidence_seen: list[int], versions: dict[int, int]) -> None:
    """One item's decision, one transaction: run again on its own after a deadlock (the items
    decided before it stay decided)."""
    user = request.user
    if kind == "p" and action == "approve":
        expected = versions.get(item.case_id, int(seen))
        versions[item.case_id] = _approve_proposal(request, item, expected, evidence_seen, note, confirm_reason)
    elif kind == "p":
        services.proposal_reject(actor=user, proposal=item, note=note)
    elif action == "approve":
        services.notice_approve(actor=user, notice=item, content_hash=seen, note=note,
                                override_reason=confirm_reason)
    else:
        services.notice_reject(actor=user, notice=item, note=note)


def _decide_one(request, kind: str, item, seen: str, **how) -> Done:
    if kind == "p":
        done = Done(key=f"p{item.pk}", name=f"P{item.pk} ({item.summary}, {item.case.reference})")
    else:
        done = Done(key=f"n{item.pk}", name=f"notice N{item.pk} (“{item.subject}”, {item.case.reference})")
    try:
        _decide(request, kind, item, seen, **how)
    except DomainError as error:  # a refusal, or Busy once the retries are spent
        done.error = error
    return done


def _outcome_words(action: str, done: list[Done]) -> list[tuple[int, str]]:
    verb = "Approved" if action == "approve" else "Rejected"
    decided = [d.name for d in done if d.error is None]
    said: list[tuple[int, str]] = []
    if decided:
        said.append((messages.SUCCESS, f"{verb}: {'; '.join(decided)}."))
    for item in done:
        if item.error is not None:
            said.append((messages.ERROR, f"Not {verb.lower()}: {item.name}. {item.error.message}"))
    return said


@require_POST
@retries_each_change
@member_required
def review_decide(request):
    """Approve or reject the items posted (`item`: "p:<pk>:<case version shown>" or "n:<pk>:<content
    hash shown>", repeated for a group), with `note` (required to reject), `confirm_reason` (a
    notice approved over the checker's flags, a case decided with no notice sent) and `evidence_seen`."""
    action = request.POST.get("action", "")
    note = (request.POST.get("note") or "")[:5000].strip()
    confirm_reason = (request.POST.get("confirm_reason") or "")[:5000].strip()
    evidence_raw = request.POST.get("evidence_seen") or ""
    params = QueryDict(request.POST.get("query", "")[:4000])
    following = request.POST.get("next", "")[:40]
    try:
        if action not in ("approve", "reject") or not _EVIDENCE.match(evidence_raw):
            raise Invalid("That decision was not understood; reload the inbox and try again.")
        items = _resolve(request.user, _parse_items(request.POST.getlist("item")))
    except Invalid as error:
        return _answer(request, params, following=request.POST.get("current", "")[:40],
                       said=[(messages.ERROR, error.message)], status=400)
    evidence_seen = [int(part) for part in evidence_raw.split(",") if part]
    versions: dict[int, int] = {}
    done = [_decide_one(request, kind, item, seen, action=action, note=note, confirm_reason=confirm_reason,
                        evidence_seen=evidence_seen, versions=versions) for kind, item, seen in items]
    refused = [d for d in done if d.error is not None]
    status = status_for(refused[0].error) if refused else 200
    # After a refusal the refused item stays selected, so the person reads why beside it.
    return _answer(request, params, following=refused[0].key if refused else following,
                   said=_outcome_words(action, done), status=status)


@require_POST
@member_required
def review_settle(request, pk: int):
    """Settle a notice whose delivery nobody recorded (cases.services.notice_settle): sent (with the
    Message-ID found in the mail log) or failed, with a reason."""
    params = QueryDict(request.POST.get("query", "")[:4000])
    notice = selectors.notice_get_for_user(user=request.user, pk=pk)
    outcome = request.POST.get("outcome", "")
    try:
        services.notice_settle(actor=request.user, notice=notice, outcome=outcome,
                               reason=request.POST.get("reason", "")[:5000],
                               message_id=request.POST.get("message_id", "")[:998])
    except DomainError as error:
        detail = " ".join(m for messages_ in (error.fields or {}).values() for m in messages_)
        said = [(messages.ERROR, f"Notice N{pk} was not settled: {error.message} {detail}".strip())]
        return _answer(request, params, following=f"n{pk}", said=said, status=status_for(error))
    words = "sent" if outcome == "sent" else "failed (it can be sent again from the case)"
    return _answer(request, params, following=request.POST.get("next", "")[:40],
                   said=[(messages.SUCCESS, f"Notice N{pk} settled as {words}.")], status=200)


def _answer(request, params: QueryDict, *, following: str, said: list[tuple[int, str]], status: int):
    if not request.htmx and status == 200:
        for level, text in said:
            messages.add_message(request, level, text)
        query = params.copy()
        if following:
            query["item"] = following
        return redirect(reverse("web:review_inbox") + ("?" + query.urlencode() if query else ""))
    context, _ = workspace_context(request, params, selected=following)
    context["said"] = [{"level": "error" if level == messages.ERROR else "success", "text": text}
                       for level, text in said]
    template = "web/review/_workspace.html" if request.htmx else "web/review/inbox.html"
    return render(request, template, context, status=status)
