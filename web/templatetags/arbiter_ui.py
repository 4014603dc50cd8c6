"""Small display helpers for the browser UI templates."""

from __future__ import annotations

import json

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.html import format_html

from web.forms import TRANSITION_LABELS
from web.labels import action_label, actor_fallback
from web.labels import label as scheme_label
from web.live import notices_in_flight

register = template.Library()


@register.filter
def actor(identifier: str, labels: dict) -> str:
    """`{{ event.actor_id|actor:labels }}`: a readable name for a recorded actor identifier, tagged
    when the actor is an agent or the system rather than a person."""
    if not identifier:
        return "—"
    label = (labels or {}).get(identifier) or actor_fallback(identifier)
    kind = identifier.partition(":")[0]
    if kind in ("agent", "system"):
        return format_html('{} <span class="tag">{}</span>', label, kind)
    return label


@register.filter
def short_hash(value: str, length: int = 12) -> str:
    return (value or "")[: int(length)]


@register.filter
def token(value) -> str:
    """A CSS-safe token for a status or risk value (`badge--under_review`)."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in str(value or "none"))


@register.filter
def transition_label(name: str) -> str:
    return TRANSITION_LABELS.get(name, (name or "").replace("_", " "))


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _status(value: str) -> str:
    return scheme_label(value, "case_status").lower() if value else ""


@register.filter
def label(value, scheme: str) -> str:
    """`{{ notice.status|label:"notice_status" }}`: the words for a stored value (web.labels)."""
    return scheme_label(value, scheme)


@register.filter
def action_words(action: str) -> str:
    """`{{ event.action|action_words }}`: an audit action in words."""
    return action_label(action)


@register.filter
def event_summary(event, labels: dict | None = None) -> str:
    """One line saying what a case event did, in words (`{{ event|event_summary:labels }}`)."""
    p = event.payload or {}
    labels = labels or {}
    kind = event.event_type
    if kind == "case.created":
        return f"Case opened: {p.get('title', '')}"
    if kind == "case.transitioned":
        text = f"{transition_label(p.get('transition', ''))}: {_status(p.get('source'))} → {_status(p.get('target'))}"
        if p.get("proposal_id"):
            text += f" (proposal #{p['proposal_id']})"
        return text + (f" — “{p['reason']}”" if p.get("reason") else "")
    if kind == "case.risk_changed":
        return (f"Risk level: {scheme_label(p.get('from'), 'risk')} → {scheme_label(p.get('to'), 'risk')}"
                f" (proposal #{p.get('proposal_id')})")
    if kind == "case.assigned":
        assignee = ""
        if p.get("assignee_id"):
            assignee = labels.get(f"user:{p['assignee_id']}", f"user #{p['assignee_id']}")
        who = ", ".join(x for x in (p.get("team") or "", assignee) if x)
        return f"Assigned to {who or '—'}"
    if kind == "evidence.added":
        return f"Evidence added: {p.get('title', '')} ({p.get('size', '?')} bytes, sha256 {short_hash(p.get('sha256'))})"
    if kind == "proposal.created":
        payload = p.get("payload") or {}
        if payload.get("transition"):
            detail = transition_label(payload["transition"]).lower()
        elif payload.get("risk_level"):
            detail = scheme_label(payload["risk_level"], "risk").lower()
        else:
            detail = payload.get("team") or ""
        kind_words = scheme_label(p.get("kind"), "proposal_kind").lower()
        return f"Proposal #{p.get('proposal_id')} made: {kind_words} {detail}".strip()
    if kind in ("proposal.approved", "proposal.rejected", "proposal.withdrawn"):
        verb = kind.split(".")[1]
        return f"Proposal #{p.get('proposal_id')} {verb}" + (f" — “{p['note']}”" if p.get("note") else "")
    if kind.startswith("notice."):
        verb = kind.split(".")[1]
        text = f"Notice #{p.get('notice_id')} {verb}"
        if p.get("content_hash"):
            text += f" (content {short_hash(p['content_hash'])})"
        if p.get("approvals_voided"):
            text += f"; {p['approvals_voided']} approval(s) voided"
        if p.get("note"):
            text += f" — “{p['note']}”"
        if p.get("error"):
            text += f" — {p['error']}"
        return text
    return kind


@register.simple_tag(takes_context=True)
def nav_current(context, *prefixes: str) -> str:
    """` aria-current="page"` when the request's path is under one of `prefixes` ("/" matches
    only the root). Lets a nav link mark itself without every view passing a section name."""
    from django.utils.safestring import mark_safe

    request = context.get("request")
    path = getattr(request, "path", "")
    for prefix in prefixes:
        if (prefix == "/" and path == "/") or (prefix != "/" and path.startswith(prefix)):
            return mark_safe(' aria-current="page"')
    return ""


@register.simple_tag
def live_list_seconds() -> int:
    """How often the queue and the inbox ask whether anything changed (ARBITER_LIVE_LIST_SECONDS)."""
    return settings.ARBITER_LIVE_LIST_SECONDS


@register.filter
def get_item(mapping, key):
    """`{{ links|get_item:name }}`: a dict value by a variable key (None when absent)."""
    return (mapping or {}).get(key)


@register.filter(name="notices_in_flight")
def notices_in_flight_filter(notices) -> bool:
    """`{% if notices|notices_in_flight %}`: keep the notices section refreshing (web.live)."""
    return notices_in_flight(notices)


@register.filter
def age(value) -> str:
    """A short age for dense lists: "12 min", "5 h", "3 d" (the exact time is in the title)."""
    if not value:
        return ""
    seconds = max(0, int((timezone.now() - value).total_seconds()))
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"
