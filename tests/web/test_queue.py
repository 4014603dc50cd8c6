"""The case queue: search every word, filters, quick views, sorts, taking a case, saved views."""

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from cases import services
from cases.models import Case
from core.errors import Forbidden, NotAllowed, NotFound
from tests.factories import make_case
from tests.helpers import assert_nothing_changed, bring_case_to
from web.models import SavedView

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def listed(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, response.content.decode()[:500]
    return [case.reference for case in response.context["page"]]


def test_search_matches_every_word_across_fields_and_the_narrative(client, analyst):
    both = make_case(actor=analyst, title="Escrow shortage", narrative="The servicer lost my hazard insurance check.")
    one = make_case(actor=analyst, title="Card fee", narrative="The servicer charged a fee.")
    other = make_case(actor=analyst, title="Escrow refund late", narrative="Nothing about insurance here? No.")
    assert listed(client, analyst, "/?q=hazard+insurance") == [both.reference]
    assert listed(client, analyst, "/?q=escrow+servicer") == [both.reference]  # title word + narrative word
    assert set(listed(client, analyst, "/?q=servicer")) == {both.reference, one.reference}
    assert listed(client, analyst, f"/?q={other.reference}") == [other.reference]
    assert listed(client, analyst, "/?q=escrow+nowhere") == []


def test_search_does_not_reach_another_tenants_narratives(client, analyst, outsider):
    make_case(actor=outsider, title="Theirs", narrative="zebra quartz")
    assert listed(client, analyst, "/?q=zebra+quartz") == []


def test_filters_product_company_assignee_tag_and_pending_work(client, analyst, analyst_b, supervisor, agent):
    mortgage = make_case(actor=analyst, title="A", product="Mortgage", company="Home Loans Inc", tags="Servicemember")
    card = make_case(actor=analyst, title="B", product="Credit card", company="Example Bank, N.A.")
    services.case_take(actor=analyst_b, case=card)
    services.proposal_create(actor=agent, case=mortgage, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Loss.")
    assert listed(client, analyst, "/?product=mortgage") == [mortgage.reference]
    assert listed(client, analyst, "/?company=example+bank,+n.a.") == [card.reference]
    assert listed(client, analyst, f"/?assignee={analyst_b.pk}") == [card.reference]
    assert listed(client, analyst, "/?tag=servicemember") == [mortgage.reference]
    assert listed(client, analyst, "/?pending=on") == [mortgage.reference]


def test_quick_views(client, analyst, analyst_b, supervisor, agent):
    mine = make_case(actor=analyst, title="Mine", narrative="")
    theirs = make_case(actor=analyst, title="Theirs", narrative="")
    loose = make_case(actor=analyst, title="Loose", narrative="")
    services.case_take(actor=analyst, case=mine)
    services.case_take(actor=analyst_b, case=theirs)
    services.proposal_create(actor=agent, case=loose, kind="risk_level", payload={"risk_level": "low"},
                             rationale="Small.")
    services.proposal_create(actor=supervisor, case=theirs, kind="risk_level", payload={"risk_level": "low"},
                             rationale="Mine to propose, not to decide.")
    assert listed(client, analyst, "/?view=mine") == [mine.reference]
    assert listed(client, analyst, "/?view=unassigned") == [loose.reference]
    assert listed(client, supervisor, "/?view=decide") == [loose.reference]  # not the one they proposed
    assert listed(client, analyst, "/?view=decide") == []  # analysts decide nothing
    client.force_login(analyst)
    assert "Supervisors decide proposals" in client.get("/?view=decide").content.decode()


def test_sorting_by_risk_both_ways_and_the_header_links(client, analyst, supervisor, agent):
    cases = {}
    for level in ("low", "critical", "medium"):
        case = make_case(actor=analyst, title=f"Risk {level}", narrative="")
        proposal = services.proposal_create(actor=agent, case=case, kind="risk_level",
                                            payload={"risk_level": level}, rationale="Assessed.")
        services.proposal_approve(actor=supervisor, proposal=proposal)
        cases[level] = case.reference
    unassessed = make_case(actor=analyst, title="Not yet", narrative="").reference
    expected = [cases["critical"], cases["medium"], cases["low"], unassessed]
    assert listed(client, analyst, "/?sort=-risk") == expected
    assert listed(client, analyst, "/?sort=risk") == list(reversed(expected))
    html = client.get("/?sort=-risk").content.decode()
    assert 'aria-sort="descending"' in html and 'href="?sort=risk"' in html  # the header toggles
    assert client.get("/?sort=bogus").status_code == 400


def test_sorted_pages_continue_with_a_cursor(client, analyst):
    for n in range(30):
        make_case(actor=analyst, title=f"Case {n}", narrative="")
    client.force_login(analyst)
    first = client.get("/?sort=status").context["page"]
    second = client.get(f"/?sort=status&after={first.next_cursor}").context["page"]
    references = [c.reference for c in first] + [c.reference for c in second]
    assert len(references) == 30 == len(set(references))
    assert references == list(Case.objects.order_by("id").values_list("reference", flat=True))


# --- taking a case ------------------------------------------------------------------------------

def test_an_analyst_takes_an_unassigned_case_in_one_click(client, analyst, case):
    client.force_login(analyst)
    html = client.get("/").content.decode()
    assert f'action="{reverse("web:case_take", args=[case.reference])}"' in html
    response = client.post(reverse("web:case_take", args=[case.reference]),
                           {"expected_version": case.version}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith(f'<tr id="case-row-{case.pk}"')
    assert f"{case.reference} is now yours." in html and "data-focus-after-swap" in html
    case.refresh_from_db()
    assert case.assignee == analyst
    event = AuditEvent.objects.filter(action="cases.case.assigned").get()
    assert event.actor_id == f"user:{analyst.pk}" and event.payload["taken"] is True
    assert case.events.order_by("-sequence").first().event_type == "case.assigned"


def test_taking_someone_elses_case_is_refused_and_changes_nothing(client, analyst, analyst_b, case):
    services.case_take(actor=analyst_b, case=case)
    client.force_login(analyst)
    with assert_nothing_changed(case):
        response = client.post(reverse("web:case_take", args=[case.reference]), **HTMX)
    assert response.status_code == 409 and "propose a reassignment" in response.content.decode()
    with assert_nothing_changed(case), pytest.raises(NotAllowed, match="already assigned to you"):
        services.case_take(actor=analyst_b, case=case)


def test_agents_auditors_and_outsiders_cannot_take(case, agent, auditor, outsider):
    with assert_nothing_changed(case), pytest.raises(Forbidden):
        services.case_take(actor=agent, case=case)
    with assert_nothing_changed(case), pytest.raises(Forbidden):
        services.case_take(actor=auditor, case=case)
    with assert_nothing_changed(case), pytest.raises(NotFound):
        services.case_take(actor=outsider, case=case)


def test_a_plain_post_take_redirects_back_with_a_message(client, analyst, case):
    client.force_login(analyst)
    response = client.post(reverse("web:case_take", args=[case.reference]), {"next": "/?view=unassigned"},
                           follow=True)
    assert response.redirect_chain[-1][0] == "/?view=unassigned"
    assert f"{case.reference} is now yours." in response.content.decode()


# --- saved views ----------------------------------------------------------------------------------

def test_saved_views_are_kept_per_person(client, analyst, analyst_b):
    client.force_login(analyst)
    response = client.post(reverse("web:saved_view_save"), {"name": "High risk", "query": "risk_level=high&after=x"})
    view = SavedView.objects.get()
    assert (view.user, view.name, view.query) == (analyst, "High risk", "risk_level=high")
    assert response.url == f"/?risk_level=high&saved={view.pk}"
    assert 'aria-label="Delete saved view High risk"' in client.get("/").content.decode()
    client.post(reverse("web:saved_view_save"), {"name": "High risk", "query": "risk_level=critical"})
    assert SavedView.objects.get().query == "risk_level=critical"  # same name: replaced
    client.force_login(analyst_b)
    assert "saved view High risk" not in client.get("/").content.decode()
    client.post(reverse("web:saved_view_delete", args=[view.pk]))
    assert SavedView.objects.filter(pk=view.pk).exists()  # not theirs to delete
    client.force_login(analyst)
    client.post(reverse("web:saved_view_delete", args=[view.pk]))
    assert not SavedView.objects.exists()


def test_a_saved_view_without_a_name_is_refused(client, analyst):
    client.force_login(analyst)
    response = client.post(reverse("web:saved_view_save"), {"name": "  ", "query": "status=new"}, follow=True)
    assert not SavedView.objects.exists()
    assert "give it a name" in response.content.decode() or "Give the view a name" in response.content.decode()


def test_sorting_by_due_date_and_the_overdue_view(client, analyst):
    from datetime import date, timedelta

    from django.utils import timezone

    today = timezone.localdate()
    late = make_case(actor=analyst, title="Late", narrative="", received_at=today - timedelta(days=200))
    soon = make_case(actor=analyst, title="Soon", narrative="", received_at=today - timedelta(days=1))
    undated = make_case(actor=analyst, title="Undated", narrative="")
    # A case with no due date at all (opened before deadlines existed): next_due is None too.
    Case.objects.filter(pk=undated.pk).update(acknowledge_due=None, response_due=None, close_due=None, next_due=None)
    # A case with nothing open comes last in either direction.
    assert listed(client, analyst, "/?sort=due") == [late.reference, soon.reference, undated.reference]
    assert listed(client, analyst, "/?sort=-due") == [soon.reference, late.reference, undated.reference]
    assert listed(client, analyst, "/?view=overdue") == [late.reference]
    html = client.get("/?view=overdue").content.decode()
    assert "deadline-state--overdue" in html and date.min.isoformat() not in html


@pytest.mark.parametrize("sort", ["due", "-due"])
def test_due_date_pages_continue_across_cases_with_no_due_date(client, analyst, supervisor, sort):
    """Keyset pages on the stored next_due: every case once, in order, the ones with
    nothing open (decided: next_due None) after all dated ones in either direction."""
    from datetime import timedelta

    from django.utils import timezone

    today = timezone.localdate()
    made = [make_case(actor=analyst, title=f"Case {n}", narrative="", received_at=today - timedelta(days=n % 7))
            for n in range(34)]
    for case in made[::5]:  # notice sent and decided: nothing open
        notice = services.notice_draft(actor=analyst, case=case, subject="Your complaint", body="We are on it.")
        services.notice_submit(actor=analyst, notice=notice)
        services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash,
                                override_reason="seen")
        services.notice_dispatch(actor=analyst, notice=notice)
        bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    client.force_login(analyst)
    seen, url, pages = [], f"/?sort={sort}", []
    while url:
        page = client.get(url).context["page"]
        pages.append([(c.next_due, c.pk) for c in page])
        seen += pages[-1]
        url = f"/?sort={sort}&after={page.next_cursor}" if page.has_next else None
    rows = list(Case.objects.values_list("next_due", "pk"))
    dated = sorted((r for r in rows if r[0] is not None), reverse=sort.startswith("-"))
    undated = sorted((r for r in rows if r[0] is None), key=lambda r: r[1], reverse=sort.startswith("-"))
    assert len(undated) == 7 and seen == dated + undated and len(pages) == 2
    back = client.get(f"/?sort={sort}&before={page.previous_cursor}").context["page"]  # "Previous" from the last
    assert [(c.next_due, c.pk) for c in back] == pages[0]


@pytest.mark.parametrize("value", [None, "not a date", 12, "9999-99-99"])
def test_a_hand_edited_due_cursor_is_a_400_with_the_first_page(client, analyst, value):
    import base64
    import json

    make_case(actor=analyst, title="Only", narrative="")
    token = base64.urlsafe_b64encode(json.dumps([value, 1]).encode()).decode().rstrip("=")
    client.force_login(analyst)
    response = client.get(f"/?sort=due&after={token}")
    assert response.status_code == 400
    assert "changed by hand" in response.content.decode()
    assert [c.title for c in response.context["page"]] == ["Only"]


def test_overdue_lists_the_most_overdue_first_unless_another_sort_is_chosen(client, analyst):
    from datetime import timedelta

    from django.utils import timezone

    today = timezone.localdate()
    later = make_case(actor=analyst, title="Late", narrative="", received_at=today - timedelta(days=100))
    oldest = make_case(actor=analyst, title="Very late", narrative="", received_at=today - timedelta(days=300))
    assert listed(client, analyst, "/?view=overdue") == [oldest.reference, later.reference]
    assert listed(client, analyst, "/?view=overdue&sort=created") == [later.reference, oldest.reference]


def test_quick_view_links_keep_the_search_filters_and_sort(client, analyst):
    make_case(actor=analyst, title="Any", narrative="")
    client.force_login(analyst)
    html = client.get("/?q=fee&risk_level=high&sort=due&after=abc&saved=3").content.decode()
    assert 'href="?q=fee&amp;risk_level=high&amp;sort=due&amp;view=overdue"' in html
    assert 'href="?q=fee&amp;risk_level=high&amp;sort=due"' in html  # "All cases"


def test_a_header_sort_answered_by_htmx_brings_the_sort_control_and_quick_views_along(client, analyst):
    make_case(actor=analyst, title="Any", narrative="")
    client.force_login(analyst)
    html = client.get("/?sort=due", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="case-results").content.decode()
    control = html[html.index('<div id="sort-control" hx-swap-oob="true">'):]
    control = control[:control.index("</select>")]
    assert '<option value="due" selected>' in control and control.count(" selected") == 1
    assert '<ul id="quick-view-links" hx-swap-oob="true">' in html and 'href="?sort=due&amp;view=mine"' in html
    # The page itself (no htmx) shows the same choice, without out-of-band copies.
    page = client.get("/?view=overdue").content.decode()
    assert '<option value="due" selected>' in page and "hx-swap-oob" not in page
