"""The Django admin for operations: every model renders, written-once rows are read-only, status
changes go through actions that call the services (with the person as actor, audited), refusals
are error messages that change nothing, and a non-superuser staff user sees only their tenant."""

import pytest
from django.apps import apps
from django.contrib import admin, messages
from django.core import mail
from django.db import connection
from django.urls import reverse

from accounts.models import Role, Tenant, User
from audit.models import AuditEvent, AuditStreamHead
from cases import services
from cases.models import (
    Approval,
    Case,
    CaseEvent,
    CaseReferenceCounter,
    CaseWords,
    Evidence,
    Notice,
    NoticeDispatch,
    NoticeStatus,
    Proposal,
)
from tests.factories import UserFactory, make_case
from tests.helpers import CountDelta, assert_nothing_changed

OWN_APPS = ("accounts", "audit", "cases")
READ_ONLY_MODELS = (AuditEvent, AuditStreamHead, CaseEvent, Evidence, NoticeDispatch, Approval,
                    CaseReferenceCounter)
STATUS_BY_ACTION_ONLY = (Case, Notice, Proposal)


def _url(model, view, *args):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _messages(response) -> list[tuple[int, str]]:
    return [(m.level, m.message) for m in response.context["messages"]]


@pytest.fixture
def root(tenant):
    return UserFactory(username="root", tenant=tenant, role=Role.ADMIN, is_staff=True, is_superuser=True)


@pytest.fixture
def staff_supervisor(supervisor):
    supervisor.is_staff = True
    supervisor.save(update_fields=["is_staff"])
    return supervisor


@pytest.fixture
def world(case, analyst, supervisor, outsider):
    """One of everything, made through the services: a case with evidence and events, a pending
    and an applied proposal (with its approval), a sent notice (with its dispatch), a notice
    pending approval, and a case of another tenant."""
    pending = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                       rationale="Small amount at stake.")
    applied = services.proposal_create(actor=analyst, case=case, kind="assignment",
                                       payload={"team": "billing"}, rationale="Billing team owns this.")
    services.proposal_approve(actor=supervisor, proposal=applied, note="ok")
    pending.refresh_from_db()  # still pending: the assignment does not touch its risk level (ADR 0006)
    sent = services.notice_draft(actor=analyst, case=case, subject="Received", body="We have your complaint.")
    services.notice_submit(actor=analyst, notice=sent)
    services.notice_approve(actor=supervisor, notice=sent, content_hash=sent.content_hash)
    services.notice_dispatch(actor=analyst, notice=sent)
    waiting = services.notice_draft(actor=analyst, case=case, subject="Update", body="Still looking into it.")
    services.notice_submit(actor=analyst, notice=waiting)
    mail.outbox.clear()
    other_case = make_case(actor=outsider, title="Another tenant's secret case")
    from datetime import date

    from cases.services.deadlines import deadline_crossings_record

    deadline_crossings_record(today=date(2100, 1, 1))  # a DeadlineCrossing (and its events) per case
    from django.core.files.uploadedfile import SimpleUploadedFile

    services.evidence_add(actor=analyst, case=case, title="Scan", upload=SimpleUploadedFile(
        "scan.pdf", b"%PDF-1.4 not really", content_type="application/pdf"))  # an EvidenceExtraction
    from audit.verify import verify_ledger

    verify_ledger()  # records the verified heads (AuditVerifiedHead)
    from accounts.services import api_key_create  # an API key: accounts has that model too

    api_key_create(tenant=case.tenant, name="CRM sync", role="analyst")
    if connection.vendor != "postgresql":  # PostgreSQL's triggers keep the search document; SQLite has none
        CaseWords.objects.create(case=case, tenant_id=case.tenant_id, words="")
    return {"case": case, "waiting_notice": waiting, "sent_notice": sent, "other_case": other_case}


def test_every_model_of_accounts_audit_and_cases_is_registered():
    for label in OWN_APPS:
        for model in apps.get_app_config(label).get_models():
            assert model in admin.site._registry, f"{model.__name__} is not in the admin"


@pytest.mark.parametrize("model", [model for label in OWN_APPS for model in apps.get_app_config(label).get_models()],
                         ids=lambda model: model.__name__)
def test_changelist_search_and_change_view_render(client, root, world, model):
    client.force_login(root)

    assert client.get(_url(model, "changelist")).status_code == 200
    assert client.get(_url(model, "changelist"), {"q": "CASE"}).status_code == 200
    obj = admin.site._registry[model].get_queryset(_request(root)).order_by("pk").first()
    assert obj is not None, f"the world fixture made no {model.__name__}"
    assert client.get(_url(model, "change", obj.pk)).status_code == 200


def _request(user):
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request


@pytest.mark.parametrize("model", [Case, Evidence, CaseEvent, Proposal, Notice, Approval, NoticeDispatch,
                                   AuditEvent, AuditStreamHead, User, Tenant], ids=lambda model: model.__name__)
def test_pages_render_for_tenant_staff(client, staff_supervisor, world, model):
    client.force_login(staff_supervisor)

    assert client.get(_url(model, "changelist")).status_code == 200
    obj = admin.site._registry[model].get_queryset(_request(staff_supervisor)).order_by("pk").first()
    assert client.get(_url(model, "change", obj.pk)).status_code == 200


@pytest.mark.parametrize("model", READ_ONLY_MODELS + STATUS_BY_ACTION_ONLY, ids=lambda model: model.__name__)
def test_written_once_rows_refuse_add_change_and_delete_even_for_a_superuser(client, root, world, model):
    client.force_login(root)
    model_admin = admin.site._registry[model]
    obj = model.objects.order_by("pk").first()
    request = _request(root)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request, obj)
    assert not model_admin.has_delete_permission(request, obj)

    with assert_nothing_changed(world["case"]):
        before = list(model.objects.order_by("pk").values())
        assert client.get(_url(model, "add")).status_code == 403
        assert client.post(_url(model, "change", obj.pk), {}).status_code == 403
        assert client.get(_url(model, "delete", obj.pk)).status_code == 403
        assert client.post(_url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
        response = client.post(_url(model, "changelist"), {"action": "delete_selected",
                                                           "_selected_action": [obj.pk], "post": "yes"})
        assert response.status_code in (200, 302)
        assert list(model.objects.order_by("pk").values()) == before


def test_status_fields_are_read_only_on_the_change_page(client, root, world):
    client.force_login(root)
    for model, obj in ((Case, world["case"]), (Notice, world["waiting_notice"])):
        response = client.get(_url(model, "change", obj.pk))
        assert response.status_code == 200
        assert 'name="status"' not in response.content.decode()


def _act(client, model, action, objs, reason="", confirm_reason=""):
    return client.post(_url(model, "changelist"), {
        "action": action, "_selected_action": [obj.pk for obj in objs], "index": 0, "select_across": 0,
        "reason": reason, "confirm_reason": confirm_reason}, follow=True)


def test_a_transition_action_calls_the_service_and_writes_an_audit_event(client, staff_supervisor, case):
    client.force_login(staff_supervisor)

    with CountDelta() as delta:
        response = _act(client, Case, "transition_triage", [case])

    assert response.status_code == 200
    assert (messages.SUCCESS, f"Triage done: {case}.") in _messages(response)
    case.refresh_from_db()
    assert (case.status, case.version) == ("triaged", 3)  # created (1), narrative evidence (2), triage (3)
    assert (delta.case_events, delta.audit_events) == (1, 1)
    event = AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("-sequence").first()
    assert (event.action, event.actor_id, event.decision) == (
        "cases.case.transitioned", f"user:{staff_supervisor.pk}", "allowed")
    assert event.payload["transition"] == "triage"


def test_a_refused_transition_shows_the_reason_and_changes_nothing(client, staff_supervisor, case):
    client.force_login(staff_supervisor)

    with assert_nothing_changed(case):
        response = _act(client, Case, "transition_decide", [case])

    assert response.status_code == 200
    [(level, text)] = _messages(response)
    assert level == messages.ERROR
    assert text.startswith(f"{case}: {case.reference} is new; it cannot decide from there. Possible now: triage")


def test_the_role_is_checked_by_the_service_not_by_django_permissions(client, root, case):
    # A superuser with the admin role may not triage a case: the policy says analysts and supervisors.
    client.force_login(root)

    with assert_nothing_changed(case):
        response = _act(client, Case, "transition_triage", [case])

    [(level, text)] = _messages(response)
    assert level == messages.ERROR
    assert "Your role (admin) cannot triage a case" in text


def test_a_transition_that_needs_a_reason_takes_it_from_the_action_bar(client, staff_supervisor, analyst, case):
    from tests.helpers import bring_case_to

    bring_case_to(case, "ready_for_decision", supervisor=staff_supervisor, analyst=analyst)
    client.force_login(staff_supervisor)

    with assert_nothing_changed(case):
        refused = _act(client, Case, "transition_decide", [case])
    [(level, text)] = _messages(refused)
    assert level == messages.ERROR and "Decide needs a reason" in text

    with assert_nothing_changed(case):  # No notice was sent, so it needs a confirmation
        refused = _act(client, Case, "transition_decide", [case], reason="Upheld; refund ordered.")
    [(level, text)] = _messages(refused)
    assert level == messages.ERROR and "No notice was ever sent" in text
    _act(client, Case, "transition_decide", [case], reason="Upheld; refund ordered.",
         confirm_reason="Consumer answered by phone.")
    case.refresh_from_db()
    assert (case.status, case.resolution) == ("decided", "Upheld; refund ordered.")


def test_one_refusal_does_not_undo_the_other_rows_of_the_same_action(client, staff_supervisor, analyst, case):
    triaged = make_case(actor=analyst, title="Already triaged")
    services.case_transition(actor=analyst, case=triaged, transition="triage")
    client.force_login(staff_supervisor)

    response = _act(client, Case, "transition_triage", [case, triaged])

    levels = sorted(level for level, _ in _messages(response))
    assert levels == [messages.SUCCESS, messages.ERROR]
    case.refresh_from_db()
    triaged.refresh_from_db()
    assert (case.status, triaged.status, triaged.version) == ("triaged", "triaged", 3)


def test_notice_actions_approve_then_send_once(client, staff_supervisor, world):
    notice = world["waiting_notice"]
    client.force_login(staff_supervisor)

    services.notice_approve(actor=staff_supervisor, notice=notice, content_hash=notice.content_hash)
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.APPROVED

    response = _act(client, Notice, "dispatch_notices", [notice])
    assert (messages.SUCCESS, f"Sent: {notice}.") in _messages(response)
    again = _act(client, Notice, "dispatch_notices", [notice])
    [(level, text)] = _messages(again)
    assert level == messages.ERROR and "already sent" in text
    assert len(mail.outbox) == 1
    assert NoticeDispatch.objects.filter(notice=notice).count() == 1


def test_notices_cannot_be_approved_from_the_admin(client, staff_supervisor, world):
    """An approval binds the text the approver read; a changelist bulk action reads nothing."""
    notice = world["waiting_notice"]
    client.force_login(staff_supervisor)
    changelist = client.get(reverse("admin:cases_notice_changelist"))
    assert b'value="approve_notices"' not in changelist.content
    assert b'value="dispatch_notices"' in changelist.content

    with assert_nothing_changed(world["case"]):
        response = _act(client, Notice, "approve_notices", [notice])
    assert not Approval.objects.filter(notice=notice).exists()
    assert response.status_code in (200, 302)


def test_rejecting_a_notice_without_a_reason_is_refused_with_the_field_message(client, staff_supervisor, world):
    notice = world["waiting_notice"]
    client.force_login(staff_supervisor)

    with assert_nothing_changed(world["case"]):
        response = _act(client, Notice, "reject_notices", [notice])

    [(level, text)] = _messages(response)
    assert level == messages.ERROR
    assert "Say why the notice is rejected." in text and "note: A reason is required." in text


def test_a_failed_send_is_reported_as_an_error_not_a_success(client, staff_supervisor, world, settings):
    settings.EMAIL_BACKEND = "tests.ops.test_tasks.BrokenBackend"
    notice = world["waiting_notice"]
    client.force_login(staff_supervisor)
    services.notice_approve(actor=staff_supervisor, notice=notice, content_hash=notice.content_hash)

    response = _act(client, Notice, "dispatch_notices", [notice])

    [(level, text)] = _messages(response)
    assert level == messages.ERROR
    assert "Sending failed (ConnectionRefusedError: SMTP server refused the connection)" in text
    notice.refresh_from_db()
    assert notice.status == NoticeStatus.FAILED


def test_proposal_actions_go_through_the_service(client, staff_supervisor, analyst, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Identity theft alleged.")
    client.force_login(staff_supervisor)

    _act(client, Proposal, "approve_proposals", [proposal], reason="Agreed.")

    proposal.refresh_from_db()
    case.refresh_from_db()
    assert (proposal.status, proposal.decision_note, case.risk_level) == ("applied", "Agreed.", "high")
    assert AuditEvent.objects.filter(action="cases.case.risk_changed", actor_id=f"user:{staff_supervisor.pk}").exists()


def test_a_stale_proposal_is_refused_from_the_admin_and_nothing_changes(client, staff_supervisor, analyst, case):
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Identity theft alleged.")
    rival = services.proposal_create(actor=staff_supervisor, case=case, kind="risk_level",
                                     payload={"risk_level": "low"}, rationale="Small amount.")
    services.proposal_approve(actor=UserFactory(username="sup2", tenant=case.tenant, role=Role.SUPERVISOR),
                              proposal=rival)  # changes the risk level this proposal depends on (ADR 0006)
    client.force_login(staff_supervisor)

    with assert_nothing_changed(case):
        response = _act(client, Proposal, "approve_proposals", [proposal])

    [(level, text)] = _messages(response)
    assert level == messages.ERROR and "risk level changed from unassessed to low" in text


# --- tenant scoping -------------------------------------------------------------------------


def test_staff_of_one_tenant_never_see_another_tenants_rows(client, staff_supervisor, world):
    other = world["other_case"]
    client.force_login(staff_supervisor)

    listing = client.get(_url(Case, "changelist")).content.decode()
    assert world["case"].reference in listing
    assert other.title not in listing
    assert "Other Regulator" not in listing  # not even in the tenant filter
    response = client.get(_url(Case, "change", other.pk), follow=True)
    assert other.title not in response.content.decode()
    assert response.redirect_chain and response.redirect_chain[-1][0] == reverse("admin:index")
    for model in (Evidence, CaseEvent, AuditEvent, AuditStreamHead, User, Tenant):
        page = client.get(_url(model, "changelist")).content.decode()
        assert "Other Regulator" not in page and f"case:{other.pk}<" not in page and "outsider" not in page
    assert client.get(_url(AuditEvent, "changelist")).context["cl"].result_count == \
        AuditEvent.objects.filter(tenant=staff_supervisor.tenant).count()


def test_an_action_cannot_reach_another_tenants_case(client, staff_supervisor, world):
    other = world["other_case"]
    client.force_login(staff_supervisor)

    with assert_nothing_changed(other):
        _act(client, Case, "transition_triage", [other])


def test_people_who_are_not_staff_are_sent_to_the_login_page(client, analyst):
    client.force_login(analyst)

    response = client.get(_url(Case, "changelist"))

    assert response.status_code == 302
    assert response.url.startswith(reverse("admin:login"))


def test_staff_whose_role_may_not_see_the_audit_trail_do_not_get_it(client, analyst, world):
    analyst.is_staff = True
    analyst.save(update_fields=["is_staff"])
    client.force_login(analyst)

    assert client.get(_url(AuditEvent, "changelist")).status_code == 403
    assert client.get(_url(Case, "changelist")).status_code == 200


def test_verify_chains_action_reports_ok(client, root, world):
    client.force_login(root)
    heads = list(AuditStreamHead.objects.all())

    response = _act(client, AuditStreamHead, "verify_chains", heads)

    assert (messages.SUCCESS, f"OK: {len(heads)} audit stream(s) verified.") in _messages(response)


# --- accounts ---------------------------------------------------------------------------------


def test_a_tenant_admin_adds_a_person_to_their_own_tenant_and_it_is_audited(client, admin_user, other_tenant):
    client.force_login(admin_user)

    response = client.post(_url(User, "add"), {"username": "newcomer", "role": Role.SUPERVISOR,
                                                "tenant": other_tenant.pk, "password1": "a-long-pass-phrase",
                                                "password2": "a-long-pass-phrase", "usable_password": "true"})

    assert response.status_code == 302, response.content.decode()[:2000]
    newcomer = User.objects.get(username="newcomer")
    assert (newcomer.tenant, newcomer.role, newcomer.is_superuser) == (admin_user.tenant, Role.SUPERVISOR, False)
    event = AuditEvent.objects.get(action="accounts.user.created")
    assert (event.tenant_id, event.actor_id, event.target_id) == (
        admin_user.tenant_id, f"user:{admin_user.pk}", str(newcomer.pk))
    assert "a-long-pass-phrase" not in str(event.payload)


def test_a_tenant_admin_cannot_edit_a_superuser_or_delete_anyone(client, admin_user, root, analyst):
    client.force_login(admin_user)

    assert client.post(_url(User, "change", root.pk), {"username": "hijacked"}).status_code == 403
    assert client.post(_url(User, "delete", analyst.pk), {"post": "yes"}).status_code == 403
    root.refresh_from_db()
    assert root.username == "root"
    assert User.objects.filter(pk=analyst.pk).exists()


def test_other_staff_see_people_read_only(client, staff_supervisor, analyst):
    client.force_login(staff_supervisor)

    assert client.get(_url(User, "change", analyst.pk)).status_code == 200
    assert client.post(_url(User, "change", analyst.pk), {"username": "renamed"}).status_code == 403
    assert client.get(_url(User, "add")).status_code == 403
    analyst.refresh_from_db()
    assert analyst.username == "analyst"


def test_a_superuser_clearing_a_tenant_gets_a_form_error_not_a_500(client, root, analyst):
    client.force_login(root)
    form = {"username": "analyst", "role": Role.ANALYST, "tenant": "", "is_active": "on",
            "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}

    response = client.post(_url(User, "change", analyst.pk), form)

    assert response.status_code == 200
    assert "Everyone but a superuser belongs to a tenant." in response.content.decode()
    analyst.refresh_from_db()
    assert analyst.tenant is not None


def test_only_a_superuser_manages_tenants(client, admin_user, root):
    client.force_login(admin_user)
    assert client.get(_url(Tenant, "add")).status_code == 403
    assert client.post(_url(Tenant, "change", admin_user.tenant_id), {"name": "x", "slug": "x"}).status_code == 403

    client.force_login(root)
    response = client.post(_url(Tenant, "add"), {"name": "Contoso Ombudsman", "slug": "contoso"})
    assert response.status_code == 302
    tenant = Tenant.objects.get(slug="contoso")
    assert AuditEvent.objects.filter(action="accounts.tenant.created", tenant_id=tenant.pk).count() == 1
