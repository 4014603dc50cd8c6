"""The review inbox: sections, filters, keyset pages, notice text with its diff."""

import re

import pytest
from django.urls import reverse

from cases import services
from tests.factories import make_case

pytestmark = pytest.mark.django_db


def get(client, user, url):
    client.force_login(user)
    return client.get(url)


def pane(client, user, notice) -> str:
    """The reading pane of the workspace with `notice` selected: where its text and diff are shown."""
    html = get(client, user, reverse("web:review_inbox") + f"?item=n{notice.pk}").content.decode()
    item = html[html.index('id="review-pane"'):]
    return item[:item.index("</section>")]


def test_a_rejected_then_revised_notice_is_shown_with_a_diff_against_the_rejected_text(client, analyst, supervisor,
                                                                                       case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Your complaint",
                                   body="We will reply within 15 days.\nRegards")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_reject(actor=supervisor, notice=notice, note="Promise less.")
    # Two edits before it goes back: the diff is against the text the supervisor rejected (v1), not v2.
    services.notice_edit(actor=analyst, notice=notice, body="We will reply within 20 days.\nRegards")
    services.notice_edit(actor=analyst, notice=notice, subject="Your complaint <ref>", recipient="new@example.org",
                         body="We will reply within 30 days & <b>sooner</b>.\nRegards")
    services.notice_submit(actor=analyst, notice=notice)
    item = pane(client, supervisor, notice)
    assert ("We will reply within <del>15</del><ins>30</ins> <del>days.</del><ins>days &amp; &lt;b&gt;sooner&lt;/b&gt;."
            "</ins>\nRegards") in item
    assert "20 days" not in item  # the intermediate draft nobody reviewed
    assert "Changes since version 1, the text supervisor rejected" in item
    assert "Subject was “Your complaint”" in item and "Your complaint &lt;ref&gt;" in item
    assert "To new@example.org (was to consumer@example.org)" in item
    assert "<b>" not in item


def test_a_first_version_shows_no_diff_even_after_an_earlier_notice_on_the_case(client, analyst, supervisor, case):
    first = services.notice_draft(actor=analyst, case=case, subject="Your complaint",
                                  body="We will reply within 15 days.")
    services.notice_submit(actor=analyst, notice=first)
    services.notice_reject(actor=supervisor, notice=first, note="Promise less.")
    second = services.notice_draft(actor=analyst, case=case, subject="Your complaint",
                                   body="We will reply within 30 days.")
    services.notice_submit(actor=analyst, notice=second)
    item = pane(client, supervisor, second)
    assert "We will reply within 30 days." in item and "<del>" not in item and "<ins>" not in item
    assert "Changes since" not in item
    html = get(client, supervisor, reverse("web:review_inbox")).content.decode()
    assert f'id="inbox-notice-{first.pk}"' not in html  # rejected: not waiting for a decision


def test_a_notice_edited_before_texts_were_kept_says_so(client, analyst, supervisor, case):
    from cases.models import CaseEvent

    notice = services.notice_draft(actor=analyst, case=case, subject="Hello", body="New text.")
    # An edit recorded before edit events kept the text they replace (events are append-only, so
    # such a row is written as it was then).
    last = case.events.order_by("-sequence").first()
    CaseEvent.objects.create(tenant=case.tenant, case=case, sequence=last.sequence + 1, event_type="notice.edited",
                             payload={"notice_id": notice.pk, "old_hash": "0" * 64, "content_hash": notice.content_hash},
                             case_version=last.case_version, actor_type="user", actor_id=f"user:{analyst.pk}",
                             policy_version=last.policy_version)
    services.notice_submit(actor=analyst, notice=notice)
    assert "revised before earlier texts were kept" in pane(client, supervisor, notice)


def test_rejected_section_lists_your_rejected_notices_with_the_reason(client, analyst, analyst_b, supervisor, case):
    mine = services.notice_draft(actor=analyst, case=case, subject="Mine", body="Text.")
    services.notice_submit(actor=analyst, notice=mine)
    services.notice_reject(actor=supervisor, notice=mine, note="Name the refund amount.")
    html = get(client, analyst, reverse("web:review_inbox") + "?section=rejected").content.decode()
    assert f'id="inbox-notice-{mine.pk}"' in html and "Name the refund amount." in html
    assert "Fix it on the case" in html
    html = get(client, analyst_b, reverse("web:review_inbox") + "?section=rejected").content.decode()
    assert f'id="inbox-notice-{mine.pk}"' not in html and "None of your proposals or notices was rejected." in html


def test_approved_section_lists_notices_not_yet_sent(client, analyst, supervisor, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Approved one", body="Text.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    html = get(client, analyst, reverse("web:review_inbox") + "?section=approved").content.decode()
    assert f'id="inbox-notice-{notice.pk}"' in html and "Send from the case" in html
    assert f'id="inbox-notice-{notice.pk}"' not in get(client, analyst, reverse("web:review_inbox")).content.decode()


def test_filters_by_kind_risk_and_proposer(client, analyst, supervisor, agent, case):
    by_agent = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Agent.")
    by_person = services.proposal_create(actor=analyst, case=case, kind="status_transition",
                                         payload={"transition": "triage"}, rationale="Person.")
    notice = services.notice_draft(actor=analyst, case=case, subject="N", body="Text.")
    services.notice_submit(actor=analyst, notice=notice)

    def shown(query):
        html = get(client, supervisor, reverse("web:review_inbox") + query).content.decode()
        return {int(pk) for pk in re.findall(r'id="inbox-proposal-(\d+)"', html)}, \
            {int(pk) for pk in re.findall(r'id="inbox-notice-(\d+)"', html)}

    assert shown("") == ({by_agent.pk, by_person.pk}, {notice.pk})
    assert shown("?proposer=agent") == ({by_agent.pk}, set())
    assert shown("?kind=risk_level") == ({by_agent.pk}, set())
    assert shown("?kind=notice") == (set(), {notice.pk})
    assert shown("?risk_level=high") == (set(), set())
    assert get(client, supervisor, reverse("web:review_inbox") + "?kind=bogus").status_code == 400


def test_the_inbox_is_paged_with_a_cursor_per_list(client, analyst, supervisor, agent):
    made = []
    for n in range(23):
        case = make_case(actor=analyst, title=f"Case {n}", narrative="")
        made.append(services.proposal_create(actor=agent, case=case, kind="risk_level",
                                             payload={"risk_level": "low"}, rationale="Small.").pk)
    response = get(client, supervisor, reverse("web:review_inbox"))
    first = response.context["proposals"]
    assert [p.pk for p in first] == made[:20] and first.has_next
    second = get(client, supervisor, reverse("web:review_inbox") + f"?p_after={first.next_cursor}").context["proposals"]
    assert [p.pk for p in second] == made[20:]
    assert 'rel="next" href="?p_after=' in response.content.decode()
    assert get(client, supervisor, reverse("web:review_inbox") + "?p_after=garbage").status_code == 400


@pytest.mark.parametrize("value", [None, "not a date", [1, 2], "9999-99-99"])
def test_a_hand_edited_inbox_cursor_is_a_400_with_the_note_and_the_first_page(client, analyst, supervisor, agent,
                                                                               value):
    import base64
    import json

    case = make_case(actor=analyst, title="Only", narrative="")
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "low"},
                                        rationale="Small.")
    token = base64.urlsafe_b64encode(json.dumps([value, 1]).encode()).decode().rstrip("=")
    response = get(client, supervisor, reverse("web:review_inbox") + f"?p_after={token}")
    assert response.status_code == 400
    assert "changed by hand; showing the first page instead" in response.content.decode()
    assert [p.pk for p in response.context["proposals"]] == [proposal.pk]
