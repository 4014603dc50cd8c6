"""Actions on the case page. Each one validates its form, calls exactly one service, and answers:

- htmx request: the case page body (`web/cases/_body.html`) re-read from the database, with the
  success message, or with the refusal pinned to the form or item it came from and the status
  the error maps to (web.errors);
- plain form post (JavaScript off): a redirect back to the case page on success, or the whole
  case page with the refusal and its status.

The service is the only judge of what is allowed; nothing here re-checks a rule."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.forms import Form
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from cases import selectors, services
from cases.models import Case
from core.errors import DomainError, NotAllowed, NotFound
from runs.services import run_start
from web.access import member_required
from web.actors import tenant_users
from web.case_page import DeadlineExtendForm, Outcome, ProposalApproveForm, case_page_context
from web.errors import add_to_form, status_for
from web.forms import (
    TRANSITION_LABELS,
    DecisionNoteForm,
    EvidenceFileForm,
    EvidenceTextForm,
    NoticeApproveForm,
    NoticeForm,
    NoticeRejectForm,
    ProposalCreateForm,
    TransitionForm,
)


def answer_case_action(request, case: Case, *, target: str, form: Form | None, call: Callable[[], str | tuple[int, str]],
            form_key: str = "", field_map: dict[str, str] | None = None, anchor: str = ""):
    """Run `call` (one service call returning the message to show, or (level, message)) and answer for htmx or a
    plain post. A refusal leaves the database as it was; the page is re-read either way, so it
    shows what is true now (e.g. the newer version after a conflict)."""
    outcome = None
    status = 200
    if form is not None and not form.is_valid():
        outcome, status = Outcome(target=target, form=form, form_key=form_key), 400
    else:
        try:
            message = call()
        except DomainError as error:
            if form is not None and error.fields:
                add_to_form(form, error, field_map=field_map)
            outcome = Outcome(target=target, error=error, form=form, form_key=form_key)
            if form is not None and getattr(form, "carries_seen_state", False) and not form.errors:
                # The form holds the version / content hash the person saw, which is what was
                # refused: show a fresh one with what is current now, keeping what they typed.
                outcome.form = None
                outcome.typed = {name: form.data[name] for name in ("reason", "note") if form.data.get(name)}
            status = status_for(error)
        else:
            level, text = message if isinstance(message, tuple) else (messages.SUCCESS, message)
            messages.add_message(request, level, text)
    if outcome is None and not request.htmx:
        return redirect(reverse("web:case_detail", kwargs={"reference": case.reference}) + (anchor or ""))
    fresh = selectors.case_get_for_user(user=request.user, reference=case.reference)
    context = case_page_context(request, fresh, outcome)
    template = "web/cases/_body.html" if request.htmx else "web/cases/detail.html"
    response = render(request, template, context, status=status)
    if request.htmx and outcome is not None:
        # Bring the refusal into view: it sits next to the form or item it concerns.
        response["HX-Reswap"] = "outerHTML show:#action-error:top"
    return response


def _confirm_reason(request) -> str:
    """The explicit confirmation some actions need (deciding/closing with no notice sent,
    approving a notice with a past date or flags): a reason, recorded in the audit by the service."""
    return (request.POST.get("confirm_reason") or "")[:5000].strip()


def _case(request, reference: str) -> Case:
    return selectors.case_get_for_user(user=request.user, reference=reference)


# --- status -----------------------------------------------------------------------------------

@require_POST
@member_required
def case_transition(request, reference: str):
    case = _case(request, reference)
    form = TransitionForm(request.POST, auto_id=f"id_{request.POST.get('transition', 'x')}_%s")
    name = request.POST.get("transition", "")

    def call():
        data = form.cleaned_data
        updated = services.case_transition(actor=request.user, case=case, transition=data["transition"],
                                           reason=data["reason"].strip(), expected_version=data["expected_version"],
                                           confirm_reason=_confirm_reason(request))
        return f"{TRANSITION_LABELS[data['transition']]}: {updated.reference} is now {updated.get_status_display().lower()}."

    return answer_case_action(request, case, target=f"transition:{name}", form=form, call=call, anchor="#status")


@require_POST
@member_required
def case_deadline_extend(request, reference: str):
    case = _case(request, reference)
    form = DeadlineExtendForm(request.POST, auto_id="id_deadline_%s")

    def call():
        data = form.cleaned_data
        services.case_deadline_extend(actor=request.user, case=case, deadline=data["deadline"], until=data["until"],
                                      reason=data["reason"].strip(), expected_version=data["expected_version"])
        return f"Due date moved to {data['until']:%Y-%m-%d}; the reason is in the audit trail."

    return answer_case_action(request, case, target="deadline_extend", form=form, call=call)


# --- evidence ---------------------------------------------------------------------------------

@require_POST
@member_required
def evidence_add_text(request, reference: str):
    case = _case(request, reference)
    form = EvidenceTextForm(request.POST, auto_id="id_text_%s")

    def call():
        data = form.cleaned_data
        evidence = services.evidence_add(actor=request.user, case=case, title=data["title"], text=data["text"],
                                         source=data["source"])
        return f"Evidence “{evidence.title}” added."

    return answer_case_action(request, case, target="evidence_text", form=form, call=call, anchor="#evidence")


@require_POST
@member_required
def evidence_upload(request, reference: str):
    case = _case(request, reference)
    form = EvidenceFileForm(request.POST, request.FILES, auto_id="id_file_%s")

    def call():
        data = form.cleaned_data
        evidence = services.evidence_add(actor=request.user, case=case, title=data["title"], upload=data["file"],
                                         source=data["source"])
        return f"File “{evidence.filename}” added as evidence."

    return answer_case_action(request, case, target="evidence_file", form=form, call=call, anchor="#evidence")


# --- proposals --------------------------------------------------------------------------------

@require_POST
@member_required
def proposal_create(request, reference: str):
    case = _case(request, reference)
    form = ProposalCreateForm(request.POST, users=tenant_users(tenant_id=case.tenant_id), auto_id="id_proposal_%s")

    def call():
        proposal = services.proposal_create(actor=request.user, case=case, kind=form.cleaned_data["kind"],
                                            payload=form.payload(), rationale=form.cleaned_data["rationale"])
        return f"Proposal recorded against version {proposal.case_version}; a supervisor decides it."

    return answer_case_action(request, case, target="proposal_new", form=form, call=call,
                   field_map=form.field_map(), anchor="#proposals")


def _proposal_action(request, reference: str, pk: int, *, form_key: str, form: Form | None,
                     call: Callable[..., str]):
    case = _case(request, reference)
    proposal = selectors.proposal_get_for_user(user=request.user, pk=pk)
    if proposal.case_id != case.pk:
        raise NotFound("No such proposal on this case.")
    return answer_case_action(request, case, target=f"proposal:{pk}", form=form, form_key=form_key,
                   call=lambda: call(proposal), anchor=f"#proposal-{pk}")


@require_POST
@member_required
def proposal_approve(request, reference: str, pk: int):
    form = ProposalApproveForm(request.POST, auto_id=f"id_p{pk}_approve_%s")

    def call(proposal):
        services.proposal_approve(actor=request.user, proposal=proposal, note=form.cleaned_data["note"].strip(),
                                  expected_version=form.cleaned_data["expected_version"],
                                  evidence_seen=form.evidence_ids(), confirm_reason=_confirm_reason(request))
        return "Proposal approved and applied to the case."

    return _proposal_action(request, reference, pk, form_key="approve", form=form, call=call)


@require_POST
@member_required
def proposal_reject(request, reference: str, pk: int):
    form = DecisionNoteForm(request.POST, note_required=True, auto_id=f"id_p{pk}_reject_%s")

    def call(proposal):
        services.proposal_reject(actor=request.user, proposal=proposal, note=form.cleaned_data["note"].strip())
        return "Proposal rejected; the case is unchanged."

    return _proposal_action(request, reference, pk, form_key="reject", form=form, call=call)


@require_POST
@member_required
def proposal_withdraw(request, reference: str, pk: int):
    def call(proposal):
        services.proposal_withdraw(actor=request.user, proposal=proposal)
        return "Proposal withdrawn."

    return _proposal_action(request, reference, pk, form_key="", form=None, call=call)


@require_POST
@member_required
def proposal_reask(request, reference: str, pk: int):
    """"Ask the agents again" on a stale proposal: a case_analysis run focused on that question,
    started (and audited, with this input) by runs.services.run_start."""

    def call(proposal):
        if not proposal.is_stale:
            raise NotAllowed("Only a stale proposal can be asked again; this one is "
                             f"{proposal.get_status_display().lower()}.")
        run = run_start(actor=request.user, case=proposal.case, graph="case_analysis",
                        input=reask_input(proposal))
        return f"Asked the agents again: run R{run.pk} re-examines “{proposal.summary}”."

    return _proposal_action(request, reference, pk, form_key="", form=None, call=call)


def reask_input(proposal) -> dict:
    """The run input of a focused re-run: the question, and the stale proposal it comes from."""
    return {"question": f"Proposal P{proposal.pk} ({proposal.summary}) went stale: {proposal.stale_message} "
                        f"Reconsider this question with the case as it is now.",
            "reask_proposal_id": proposal.pk, "kind": proposal.kind, "stale_reason": proposal.stale_reason}


# --- notices ----------------------------------------------------------------------------------

@require_POST
@member_required
def notice_draft(request, reference: str):
    case = _case(request, reference)
    form = NoticeForm(request.POST, auto_id="id_notice_%s")

    def call():
        data = form.cleaned_data
        services.notice_draft(actor=request.user, case=case, recipient=data["recipient"], subject=data["subject"],
                              body=data["body"])
        return "Notice drafted. Submit it for approval when it is ready."

    return answer_case_action(request, case, target="notice_new", form=form, call=call, anchor="#notices")


def _notice_action(request, reference: str, pk: int, *, form_key: str, form: Form | None,
                   call: Callable[..., str]):
    case = _case(request, reference)
    notice = selectors.notice_get_for_user(user=request.user, pk=pk)
    if notice.case_id != case.pk:
        raise NotFound("No such notice on this case.")
    return answer_case_action(request, case, target=f"notice:{pk}", form=form, form_key=form_key,
                   call=lambda: call(notice), anchor=f"#notice-{pk}")


@require_POST
@member_required
def notice_edit(request, reference: str, pk: int):
    form = NoticeForm(request.POST, auto_id=f"id_n{pk}_edit_%s")

    def call(notice):
        previous = notice.status
        data = form.cleaned_data
        edited = services.notice_edit(actor=request.user, notice=notice, recipient=data["recipient"],
                                      subject=data["subject"], body=data["body"])
        if edited.status != previous:
            return "Notice edited. It is a draft again: any approval of the old text no longer counts."
        return "Notice saved."

    return _notice_action(request, reference, pk, form_key="edit", form=form, call=call)


@require_POST
@member_required
def notice_submit(request, reference: str, pk: int):
    def call(notice):
        services.notice_submit(actor=request.user, notice=notice)
        return "Notice submitted for approval."

    return _notice_action(request, reference, pk, form_key="", form=None, call=call)


@require_POST
@member_required
def notice_approve(request, reference: str, pk: int):
    form = NoticeApproveForm(request.POST, auto_id=f"id_n{pk}_approve_%s")

    def call(notice):
        services.notice_approve(actor=request.user, notice=notice, content_hash=form.cleaned_data["content_hash"],
                                note=form.cleaned_data["note"].strip(), override_reason=_confirm_reason(request))
        return "Notice approved. It can now be sent."

    return _notice_action(request, reference, pk, form_key="approve", form=form, call=call)


@require_POST
@member_required
def notice_reject(request, reference: str, pk: int):
    form = NoticeRejectForm(request.POST, auto_id=f"id_n{pk}_reject_%s")

    def call(notice):
        services.notice_reject(actor=request.user, notice=notice, note=form.cleaned_data["note"].strip())
        return "Notice rejected; its drafter can edit it and submit it again."

    return _notice_action(request, reference, pk, form_key="reject", form=form, call=call)


@require_POST
@member_required
def notice_withdraw(request, reference: str, pk: int):
    def call(notice):
        services.notice_withdraw(actor=request.user, notice=notice)
        return "Notice withdrawn."

    return _notice_action(request, reference, pk, form_key="", form=None, call=call)


@require_POST
@member_required
def notice_send(request, reference: str, pk: int):
    def call(notice):
        services.notice_dispatch_request(actor=request.user, notice=notice)
        return (f"Sending: the notice to {notice.recipient} is queued and goes out within moments; "
                f"this section shows it as sent when it is.")

    return _notice_action(request, reference, pk, form_key="", form=None, call=call)
