"""Browser pages: who sees what, tenant isolation, filters, error pages."""

import re

import pytest
from django.urls import reverse

from cases import services
from tests.factories import UserFactory, make_case

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def page(client, user, url, **extra):
    client.force_login(user)
    return client.get(url, **extra)


# --- login / logout -------------------------------------------------------------------------

def test_login_page_renders_a_labelled_form(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    html = response.content.decode()
    assert '<label for="id_username">' in html and '<label for="id_password">' in html


def test_login_sends_the_person_to_the_case_queue(client, analyst):
    response = client.post(reverse("login"), {"username": "analyst", "password": "pw-for-tests"})
    assert response.status_code == 302 and response["Location"] == reverse("web:case_list")


def test_a_wrong_password_says_what_to_check(client, analyst):
    response = client.post(reverse("login"), {"username": "analyst", "password": "nope"})
    assert response.status_code == 200
    assert "Check the username and password" in response.content.decode()


def test_logout_is_a_post_and_ends_the_session(client, analyst):
    client.force_login(analyst)
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("web:case_list")).status_code == 302


@pytest.mark.parametrize("url", ["/", "/review/", "/audit/", "/cases/new/", "/cases/CASE-2026-000001/"])
def test_pages_need_a_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_an_account_without_a_tenant_is_told_why_it_sees_nothing(client, db):
    root = UserFactory(username="root", tenant=None, is_superuser=True, is_staff=True)
    response = page(client, root, "/")
    assert response.status_code == 403
    assert "not attached to any tenant" in response.content.decode()


# --- case queue -------------------------------------------------------------------------------

@pytest.mark.parametrize("persona", ["analyst", "supervisor", "auditor", "admin_user"])
def test_case_queue_renders_for_every_persona(client, request, persona, case):
    user = request.getfixturevalue(persona)
    response = page(client, user, "/")
    assert response.status_code == 200
    assert case.reference in response.content.decode()


def test_case_queue_shows_only_this_tenants_cases(client, analyst, outsider, case):
    theirs = make_case(actor=outsider, title="Other tenant's secret case")
    html = page(client, analyst, "/").content.decode()
    assert case.reference in html and "Other tenant&#x27;s secret case" not in html
    html = page(client, outsider, "/").content.decode()
    assert theirs.reference in html and case.title not in html


def test_case_queue_filters_by_status_risk_and_search(client, analyst, supervisor):
    mortgage = make_case(actor=analyst, title="Escrow shortage on a mortgage", product="Mortgage")
    card = make_case(actor=analyst, title="Card fee charged twice", product="Credit card")
    services.case_transition(actor=analyst, case=card, transition="triage")
    html = page(client, analyst, "/?status=triaged").content.decode()
    assert card.reference in html and mortgage.reference not in html
    html = page(client, analyst, "/?q=escrow").content.decode()
    assert mortgage.reference in html and card.reference not in html
    html = page(client, analyst, "/?risk_level=high").content.decode()
    assert "No case matches these filters" in html


def test_case_queue_counts_pending_proposals(client, analyst, agent, case):
    services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Large loss.")
    html = page(client, analyst, "/").content.decode()
    assert 'title="1 pending proposal"' in html


def test_an_unknown_filter_value_is_a_400_with_a_message_not_a_500(client, analyst, case):
    response = page(client, analyst, "/?status=bogus&page=abc")
    assert response.status_code == 400
    html = response.content.decode()
    assert "Some filters were not understood" in html and case.reference in html


def test_case_queue_paginates_with_a_cursor(client, analyst):
    """Keyset pages: no page numbers, a Next link that carries a cursor; the pages
    together list every case once, in order, and the filters stay in the links."""
    made = [make_case(actor=analyst, title=f"Case number {n}", narrative="") for n in range(27)]
    first = page(client, analyst, "/").content.decode()
    assert "27 cases" in first
    next_url = re.search(r'rel="next" href="\?after=([\w-]+)" hx-get="\?after=\1" hx-target="#case-results"', first)
    assert next_url and 'rel="prev"' not in first
    second = page(client, analyst, f"/?after={next_url.group(1)}")
    assert second.status_code == 200
    listed = [c.reference for c in page(client, analyst, "/").context["page"]] + \
        [c.reference for c in second.context["page"]]
    assert listed == [c.reference for c in reversed(made)]
    html = second.content.decode()
    assert 'rel="next"' not in html and 'rel="prev"' in html and "First page" in html
    back = re.search(r'rel="prev" href="\?before=([\w-]+)"', html).group(1)
    assert [c.reference for c in page(client, analyst, f"/?before={back}").context["page"]] == listed[:25]
    filtered = page(client, analyst, "/?status=new").content.decode()
    assert re.search(r'href="\?status=new&amp;after=[\w-]+"', filtered)


def test_a_hand_edited_cursor_shows_the_first_page_and_says_so(client, analyst, case):
    response = page(client, analyst, "/?after=not-a-cursor")
    assert response.status_code == 400
    html = response.content.decode()
    assert "That page link is out of date" in html and case.reference in html


def test_case_queue_answers_htmx_with_the_results_partial(client, analyst, case):
    response = page(client, analyst, "/?q=billing", HTTP_HX_TARGET="case-results", **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith("<div id=\"case-results\"") and "<html" not in html
    assert case.reference in html


# --- new case ---------------------------------------------------------------------------------

def test_new_case_form_opens_a_case_and_lands_on_it(client, analyst):
    client.force_login(analyst)
    response = client.post(reverse("web:case_create"), {
        "title": "Loan servicer lost my payment", "product": "Mortgage", "complainant_email": "c@example.org",
        "received_at": "2026-03-01", "narrative": "I paid on time and the servicer says I did not."})
    assert response.status_code == 302
    case = analyst.tenant.cases.get(title="Loan servicer lost my payment")
    assert response["Location"] == reverse("web:case_detail", args=[case.reference])
    assert case.reference.startswith("CASE-2026-") and case.evidence.count() == 1


def test_new_case_form_shows_field_errors_and_opens_nothing(client, analyst):
    from tests.helpers import assert_nothing_changed

    client.force_login(analyst)
    with assert_nothing_changed():
        response = client.post(reverse("web:case_create"), {"title": "", "complainant_email": "not-an-email",
                                                            "received_at": "yesterday"})
    assert response.status_code == 400
    form = response.context["form"]
    assert set(form.errors) == {"title", "complainant_email", "received_at"}
    assert "The case was not opened" in response.content.decode()


def test_an_auditor_cannot_open_cases(client, auditor):
    response = page(client, auditor, reverse("web:case_create"))
    assert response.status_code == 403
    assert "cannot open cases" in response.content.decode()
    assert "New case" not in page(client, auditor, "/").content.decode()


# --- case page --------------------------------------------------------------------------------

@pytest.mark.parametrize("persona", ["analyst", "supervisor", "auditor", "admin_user"])
def test_case_page_renders_for_every_persona(client, request, persona, case):
    user = request.getfixturevalue(persona)
    response = page(client, user, reverse("web:case_detail", args=[case.reference]))
    assert response.status_code == 200
    html = response.content.decode()
    assert case.title in html and "Complaint narrative" in html


def test_case_page_offers_the_transitions_the_role_may_perform_now(client, analyst, supervisor, auditor, case):
    url = reverse("web:case_detail", args=[case.reference])
    html = page(client, analyst, url).content.decode()
    assert 'name="transition" value="triage"' in html
    assert f'name="expected_version" value="{case.version}"' in html
    assert "Auditors read cases" in page(client, auditor, url).content.decode()
    auditor_html = page(client, auditor, url).content.decode()
    assert 'name="transition"' not in auditor_html and "Add text" not in auditor_html


def test_an_unmet_condition_is_shown_disabled_with_the_reason(client, analyst, supervisor, case):
    from tests.helpers import bring_case_to

    bring_case_to(case, "under_review", supervisor=supervisor)
    html = page(client, analyst, reverse("web:case_detail", args=[case.reference])).content.decode()
    assert "Not yet: the case&#x27;s risk level must be assessed first." in html
    assert 'disabled aria-describedby="unmet-mark_ready"' in html


def test_a_transition_that_needs_a_reason_has_a_labelled_reason_field(client, supervisor, analyst, case):
    from tests.helpers import bring_case_to

    bring_case_to(case, "ready_for_decision", supervisor=supervisor, analyst=analyst)
    html = page(client, supervisor, reverse("web:case_detail", args=[case.reference])).content.decode()
    assert '<label for="id_decide_reason">Decision and resolution' in html


def test_another_tenants_case_is_a_404_page(client, outsider, case):
    response = page(client, outsider, reverse("web:case_detail", args=[case.reference]))
    assert response.status_code == 404
    html = response.content.decode()
    assert case.title not in html and "Not found" in html


def test_an_unknown_case_is_a_404_page(client, analyst):
    assert page(client, analyst, "/cases/CASE-1999-999999/").status_code == 404


def test_a_file_can_be_downloaded_by_its_tenant_only(client, analyst, outsider, case):
    from django.core.files.uploadedfile import SimpleUploadedFile

    evidence = services.evidence_add(actor=analyst, case=case, title="Statement",
                                     upload=SimpleUploadedFile("statement.csv", b"date,amount\n", "text/csv"))
    url = reverse("web:evidence_download", args=[case.reference, evidence.pk])
    response = page(client, analyst, url)
    assert response.status_code == 200 and b"".join(response.streaming_content) == b"date,amount\n"
    assert response["Content-Disposition"].startswith("attachment")
    assert page(client, outsider, url).status_code == 404


# --- review inbox -----------------------------------------------------------------------------

def test_review_inbox_lists_pending_proposals_and_notices(client, supervisor, analyst, agent, case):
    services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="The narrative reports a $1,200 loss.")
    notice = services.notice_draft(actor=analyst, case=case, subject="We received your complaint", body="Hello.")
    services.notice_submit(actor=analyst, notice=notice)
    html = page(client, supervisor, reverse("web:review_inbox")).content.decode()
    assert "risk_assessor 1.0 <span class=\"tag\">agent</span>" in html and "Risk level → High" in html
    # One list (the proposal first: it is older), the selected one read in the pane beside it.
    assert "We received your complaint" in html and "against version 2" in html


def test_review_inbox_keeps_a_proposal_whose_preconditions_hold(client, supervisor, analyst, agent, case):
    """Staleness by precondition (ADR 0006): a newer case version alone does not mark it stale."""
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "low"},
                                        rationale="Small amount.")
    services.evidence_add(actor=analyst, case=case, title="Letter", text="More detail.")
    case.refresh_from_db()
    assert case.version > proposal.case_version
    html = page(client, supervisor, reverse("web:review_inbox")).content.decode()
    assert f"#proposal-{proposal.pk}" in html and "badge--stale" not in html


def test_review_inbox_is_tenant_scoped(client, outsider, agent, case):
    services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Secret rationale of the first tenant.")
    html = page(client, outsider, reverse("web:review_inbox")).content.decode()
    assert "Secret rationale" not in html and "Nothing is waiting for a decision." in html


# --- audit ------------------------------------------------------------------------------------

@pytest.mark.parametrize("persona", ["auditor", "supervisor", "admin_user"])
def test_audit_timeline_is_open_to_auditors_supervisors_and_admins(client, request, persona, case):
    user = request.getfixturevalue(persona)
    response = page(client, user, reverse("web:audit_timeline"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<code>cases.case.created</code>" in html and "<code>cases.evidence.added</code>" in html


def test_audit_timeline_shows_hash_prefix_policy_and_actor(client, auditor, analyst, case):
    from audit.models import AuditEvent

    event = AuditEvent.objects.get(stream=f"case:{case.pk}", action="cases.case.created")
    html = page(client, auditor, reverse("web:audit_timeline")).content.decode()
    assert event.hash[:12] in html and event.policy_version in html and ">analyst<" in html


def test_audit_timeline_filters_by_action(client, auditor, case):
    html = page(client, auditor, reverse("web:audit_timeline") + "?action=cases.evidence").content.decode()
    assert "<code>cases.evidence.added</code>" in html and "<code>cases.case.created</code>" not in html


@pytest.mark.parametrize("url_name", ["web:audit_timeline", "web:case_audit"])
def test_an_analyst_gets_a_403_page_that_says_who_can_see_the_audit(client, analyst, case, url_name):
    args = [case.reference] if url_name == "web:case_audit" else []
    response = page(client, analyst, reverse(url_name, args=args))
    assert response.status_code == 403
    assert "open to auditors, supervisors and administrators only" in response.content.decode()


def test_case_audit_shows_only_that_case(client, auditor, analyst, case):
    other = make_case(actor=analyst, title="Another case")
    html = page(client, auditor, reverse("web:case_audit", args=[case.reference])).content.decode()
    assert f"case:{case.pk}" in html and f"case:{other.pk}" not in html


def test_case_audit_of_another_tenants_case_is_a_404(client, outsider, case):
    assert page(client, outsider, reverse("web:case_audit", args=[case.reference])).status_code == 404


def test_audit_timeline_is_tenant_scoped(client, outsider, case):
    html = page(client, outsider, reverse("web:audit_timeline")).content.decode()
    assert f"case:{case.pk}" not in html and "0 events" in html


def test_nav_shows_audit_only_to_roles_that_may_see_it(client, analyst, auditor):
    assert 'href="/audit/"' not in page(client, analyst, "/").content.decode()
    assert 'href="/audit/"' in page(client, auditor, "/").content.decode()


def test_review_inbox_names_the_proposed_assignee(client, supervisor, analyst_b, agent, case):
    services.proposal_create(actor=agent, case=case, kind="assignment",
                             payload={"team": "Cards desk", "assignee_id": analyst_b.pk}, rationale="Workload.")
    html = page(client, supervisor, reverse("web:review_inbox")).content.decode()
    assert "Assign to team Cards desk and analyst_b" in html


def test_the_timeline_names_who_a_case_was_assigned_to(client, supervisor, analyst_b, agent, case):
    proposal = services.proposal_create(actor=agent, case=case, kind="assignment",
                                        payload={"team": "Cards desk", "assignee_id": analyst_b.pk},
                                        rationale="Workload.")
    services.proposal_approve(actor=supervisor, proposal=proposal)
    html = page(client, supervisor, reverse("web:case_detail", args=[case.reference])).content.decode()
    assert "Assigned to Cards desk, analyst_b" in html


def test_staff_see_a_link_to_the_admin_site(client, admin_user, analyst):
    assert 'href="/admin/"' in page(client, admin_user, "/").content.decode()
    assert 'href="/admin/"' not in page(client, analyst, "/").content.decode()
