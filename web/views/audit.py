"""The audit timeline, for the tenant and for one case. Auditors, supervisors and admins only.

By default it shows people's decisions (actions taken by a person); agents' and the system's run
plumbing is one click away (scope=all). Filters by actor, case, action, decision and date; keyset
pages; CSV and JSON-lines export of exactly what the filter selects, streamed; each target linked;
approval notes shown; and the hash-chain status of the streams in view with the time each was last
verified (what `audit_verify` recorded: a read, no hash recomputed), a case's short stream also
checked on page load."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from types import SimpleNamespace

from django.contrib import messages
from django.http import StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.views.decorators.http import require_POST

from audit.selectors import audit_chain_status, audit_events_for_tenant
from audit.verify import verify_stream
from cases import selectors
from core.errors import DomainError, Invalid, NotFound
from web.access import member_required, require_audit_access
from web.actors import actor_labels, tenant_users
from web.forms import AuditFilterForm
from web.keyset import keyset_page
from web.labels import SCHEMES, action_label, label
from web.services import audit_stream_verify_now
from web.templatetags.arbiter_ui import event_summary

EVENTS_PER_PAGE = 50
# A case's own trail also re-checks its stream on page load when it is at most this long (a bounded
# cost); longer ones, and the tenant timeline, show only what `audit_verify` recorded.
LIVE_VERIFY_MAX_EVENTS = 2000
CHAIN_STATES = ("verified", "behind", "never", "broken")
# Breaks "Verify now" found, per stream, kept in the person's session: a broken stream keeps its
# recorded verified head, so without this the page would go on showing the last good verification.
BREAKS_KEY = "audit_breaks"
COUNT_LIMIT = 1000
EXPORT_CHUNK = 2000
EXPORT_FIELDS = ("id", "created_at", "tenant_id", "stream", "sequence", "actor_type", "actor_id", "action",
                 "target_type", "target_id", "run_id", "policy_version", "decision", "evidence_refs", "payload",
                 "prev_hash", "hash")

# Offered in the filter as a starting point; any action prefix can be typed.
ACTION_SUGGESTIONS = (
    "cases.case", "cases.case.created", "cases.case.transitioned", "cases.case.risk_changed", "cases.case.assigned",
    "cases.evidence.added", "cases.proposal", "cases.proposal.created", "cases.proposal.approved",
    "cases.proposal.rejected", "cases.proposal.withdrawn", "cases.proposal.staled", "cases.notice",
    "cases.notice.drafted", "cases.notice.edited", "cases.notice.submitted", "cases.notice.approved",
    "cases.notice.rejected", "cases.notice.withdrawn", "cases.notice.dispatch_started", "cases.notice.sent",
    "cases.notice.dispatch_failed",
)


def _case_id(stream: str) -> int | None:
    kind, _, value = stream.partition(":")
    return int(value) if kind == "case" and value.isdigit() else None


def _filter_form(request, *, users) -> AuditFilterForm:
    form = AuditFilterForm(request.GET)
    form.fields["actor"].choices = [("", "Anyone"), *[(f"user:{u.pk}", u.username) for u in users]]
    form.fields["decision"].choices = [("", "Any decision"), *SCHEMES["decision"].items()]
    return form


def _events(request, form: AuditFilterForm, *, case=None):
    """The filtered queryset, and the case the filter names (NotFound turns into a form error)."""
    data = form.cleaned_data if form.is_valid() else getattr(form, "cleaned_data", {})
    reference = (data.get("case") or "").strip()
    if case is None and reference:
        try:
            case = selectors.case_get_for_user(user=request.user, reference=reference)
        except NotFound:
            form.add_error("case", f"No case {reference} in your organisation.")
            return audit_events_for_tenant(tenant_id=request.user.tenant_id).none(), None
    scope_all = data.get("scope") == "all" or bool(data.get("actor_type"))
    events = audit_events_for_tenant(
        tenant_id=request.user.tenant_id, case_id=case.pk if case else None,
        action=(data.get("action") or "").strip() or None, actor_id=data.get("actor") or None,
        actor_type=data.get("actor_type") or (None if scope_all else "user"),
        decision=data.get("decision") or None, date_from=data.get("date_from"), date_to=data.get("date_to"))
    return events, case


def _stream_order(status) -> tuple:
    kind, _, rest = status.stream.partition(":")
    return (kind, int(rest) if rest.isdigit() else 0, rest)


def stream_name(stream: str, references: dict[int, str]) -> str:
    case_id = _case_id(stream)
    if case_id is not None:
        return f"Case {references.get(case_id) or stream}"
    if stream.startswith("tenant:"):
        return "Organisation-wide events"
    return label(stream, "stream")


def _known_break(stream: str, breaks: dict, verified_at) -> dict | None:
    """The break "Verify now" found on `stream` in this session, unless a later verification passed."""
    found = breaks.get(stream)
    if not found:
        return None
    try:
        at = datetime.fromisoformat(found["at"])
    except (KeyError, TypeError, ValueError):
        return None
    return None if verified_at is not None and verified_at > at else found | {"at": at}


def _chain_line(status, references: dict[int, str], breaks: dict) -> dict:
    """One stream's one chain status for the page: its name in words, its state (CHAIN_STATES) and
    the figures the sentence needs."""
    broken = _known_break(status.stream, breaks, status.verified_at)
    if broken is not None:
        state = "broken"
    else:
        state = "never" if status.never_verified else ("verified" if status.up_to_date else "behind")
    return {"stream": status.stream, "name": stream_name(status.stream, references), "state": state,
            "state_label": label(state, "chain_state"), "events": status.events, "sequence": status.verified_sequence,
            "verified_at": status.verified_at, "appended": status.appended_since, "break": broken}


def _chain_summary(chains: list[dict]) -> dict:
    counts = {state: sum(1 for c in chains if c["state"] == state) for state in CHAIN_STATES}
    times = [c["verified_at"] for c in chains if c["verified_at"] is not None]
    return {"streams": len(chains), **counts, "oldest": min(times) if times else None}


def _link(event, references: dict[int, str]) -> str | None:
    """Where the event's target is shown: the case page (at the item), the run, or nothing."""
    reference = references.get(_case_id(event.stream))
    kind, pk = event.target_type, event.target_id
    if kind == "run" and str(pk).isdigit():
        return reverse("web:run_detail", args=[int(pk)])
    if reference is None:
        return None
    anchor = {"proposal": f"#proposal-{pk}", "notice": f"#notice-{pk}", "evidence": f"#evidence-{pk}"}.get(kind, "")
    return reverse("web:case_detail", args=[reference]) + anchor


def _timeline(request, *, case=None):
    require_audit_access(request.user)
    users = list(tenant_users(tenant_id=request.user.tenant_id))
    form = _filter_form(request, users=users)
    form.is_valid()
    events, case_filter = _events(request, form, case=case)
    status = 200 if not form.errors else 400
    notes = []
    try:
        page = keyset_page(events, key="created_at", descending=True, cursor=request.GET.get("after"),
                           before=request.GET.get("before"), size=EVENTS_PER_PAGE)
    except Invalid as error:
        notes.append(error.message)
        status = 400
        page = keyset_page(events, key="created_at", descending=True, size=EVENTS_PER_PAGE)
    total = events.order_by()[:COUNT_LIMIT + 1].count()
    assignees = {f"user:{(e.payload or {}).get('assignee_id')}" for e in page
                 if e.action == "cases.case.assigned" and (e.payload or {}).get("assignee_id")}
    labels = actor_labels(tenant_id=request.user.tenant_id, identifiers={e.actor_id for e in page} | assignees,
                          usernames={u.pk: u.username for u in users})
    case_ids = {_case_id(e.stream) for e in page} - {None}
    if case_filter is not None:
        references = {case_filter.pk: case_filter.reference}
    else:  # one query for the page's cases, through the tenant-scoped selector
        references = dict(selectors.case_list_for_user(user=request.user).filter(pk__in=case_ids)
                          .values_list("pk", "reference")) if case_ids else {}
    for event in page:
        event.case_reference = references.get(_case_id(event.stream), "")
        event.link = _link(event, references)
        event.action_words = action_label(event.action)
        event.run_link = reverse("web:run_detail", args=[int(event.run_id)]) if event.run_id.isdigit() else None
        event.note = (event.payload or {}).get("note") or (event.payload or {}).get("reason") or ""
        event.change_words = change_words(event, labels)
    # The hash-chain status of the streams in view: read from the stream heads and the
    # heads `audit_verify` recorded — no hash recomputed for the timeline, whatever its size.
    streams = [f"case:{case_filter.pk}"] if case_filter is not None else [e.stream for e in page]
    statuses = audit_chain_status(tenant_id=request.user.tenant_id, streams=streams)
    breaks = request.session.get(BREAKS_KEY) or {}
    chains = [_chain_line(known, references, breaks) for known in sorted(statuses.values(), key=_stream_order)]
    for event in page:
        known = statuses.get(event.stream)
        event.chain_verified = bool(known and known.verified_sequence and event.sequence <= known.verified_sequence)
    chain = None
    case_status = statuses.get(streams[0]) if case_filter is not None else None
    if case_status is not None and case_status.events <= LIVE_VERIFY_MAX_EVENTS:
        # One case's stream is short: it is also checked now (bounded), and the page says when.
        broken = verify_stream(case_status.stream)
        chain = {"ok": broken is None, "verified_at": timezone.now(), "break": broken,
                 "reference": case_filter.reference, "stream": case_status.stream, "events": case_status.events}
    query = request.GET.copy()
    for key in ("after", "before"):
        query.pop(key, None)
    data = getattr(form, "cleaned_data", {})
    return render(request, "web/audit/timeline.html", {
        "case": case, "case_filter": case_filter, "form": form, "page": page, "labels": labels,
        "query": query.urlencode(), "suggestions": ACTION_SUGGESTIONS, "total": total,
        "total_is_capped": total > COUNT_LIMIT, "count_limit": COUNT_LIMIT, "notes": notes, "chain": chain,
        "chains": chains, "chain_summary": _chain_summary(chains),
        "live_verify_max": LIVE_VERIFY_MAX_EVENTS if case_filter is not None else None,
        "scope_all": data.get("scope") == "all" or bool(data.get("actor_type")),
        "export_query": query.urlencode(),
    }, status=status)


# Audit actions whose words say what changed, before → after (as on the case timeline).
CHANGE_ACTIONS = ("cases.case.transitioned", "cases.case.risk_changed", "cases.case.assigned",
                  "cases.proposal.created")


def change_words(event, labels: dict) -> str:
    """What a case's audit event changed, before → after, in the case timeline's words (a case's
    audited payload is its case event's: `cases.case.transitioned` is `case.transitioned`)."""
    if event.action not in CHANGE_ACTIONS:
        return ""
    # The reason or note is shown under it already (event.note): the words here are the change only.
    payload = {k: v for k, v in (event.payload or {}).items() if k not in ("reason", "note")}
    return event_summary(SimpleNamespace(event_type=event.action.removeprefix("cases."), payload=payload), labels)


@require_POST
@member_required
def audit_verify_now(request):
    """"Verify now": one stream verified in full and recorded; back to the page it was asked from,
    which shows the stream's one status (and a message saying what was found)."""
    require_audit_access(request.user)  # the audit pages' own refusal (403) for those who cannot see them
    stream = request.POST.get("stream", "")
    back = request.POST.get("next") or ""
    back = back if back.startswith("/audit/") or (back.startswith("/cases/") and "/audit/" in back) \
        else reverse("web:audit_timeline")
    try:
        found = audit_stream_verify_now(user=request.user, stream=stream)
    except DomainError as error:
        messages.error(request, error.message)
        return redirect(back)
    references = {}
    if _case_id(stream) is not None:
        references = dict(selectors.case_list_for_user(user=request.user).filter(pk=_case_id(stream))
                          .values_list("pk", "reference"))
    name = stream_name(stream, references)
    breaks = dict(request.session.get(BREAKS_KEY) or {})
    if found.broken is None:
        breaks.pop(stream, None)
        messages.success(request, f"{name}: verified {found.events} event{'s' if found.events != 1 else ''} "
                                  f"at {date_format(timezone.localtime(found.at), 'H:i')} — intact.")
    else:
        breaks[stream] = {"sequence": found.broken.sequence, "reason": found.broken.reason, "at": found.at.isoformat()}
        messages.error(request, f"{name}: broken at event {found.broken.sequence} — {found.broken.reason}.")
    request.session[BREAKS_KEY] = breaks
    return redirect(back)


@member_required
def audit_timeline(request):
    return _timeline(request)


@member_required
def case_audit(request, reference: str):
    require_audit_access(request.user)  # before revealing whether the case exists
    case = selectors.case_get_for_user(user=request.user, reference=reference)
    return _timeline(request, case=case)


class _Echo:
    def write(self, value):
        return value


def _export_rows(events):
    for event in events.iterator(chunk_size=EXPORT_CHUNK):
        yield [getattr(event, name) if name not in ("evidence_refs", "payload")
               else json.dumps(getattr(event, name), sort_keys=True, ensure_ascii=False)
               for name in EXPORT_FIELDS]


@member_required
def audit_export(request, fmt: str):
    """The events the timeline's filter selects (every page), streamed as CSV or JSON lines."""
    require_audit_access(request.user)
    if fmt not in ("csv", "jsonl"):
        raise NotFound(f"No export as .{fmt}; choose .csv or .jsonl.")
    users = list(tenant_users(tenant_id=request.user.tenant_id))
    form = _filter_form(request, users=users)
    form.is_valid()
    events, _case = _events(request, form)
    if form.errors:
        problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
        raise Invalid(f"The export was not made: {problems}. Correct the filter and export again.")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    if fmt == "csv":
        writer = csv.writer(_Echo())
        rows = (writer.writerow(row) for row in _with_header(_export_rows(events)))
        response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    else:
        lines = (json.dumps(dict(zip(EXPORT_FIELDS, row, strict=True)), default=str, ensure_ascii=False) + "\n"
                 for row in _export_rows(events))
        response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.jsonl"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _with_header(rows):
    yield list(EXPORT_FIELDS)
    yield from rows
