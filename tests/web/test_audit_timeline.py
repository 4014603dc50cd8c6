"""The audit timeline for auditors: people's decisions by default, filters, streamed
exports of what the filter selects, linked targets, notes, and the chain status of a case."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditEvent
from cases import services
from tests.audit.tampering import raw_execute, triggers_disabled

pytestmark = pytest.mark.django_db


def get(client, user, url):
    client.force_login(user)
    return client.get(url)


def actions_on_page(response) -> list[str]:
    return [e.action for e in response.context["page"]]


@pytest.fixture
def history(case, analyst, supervisor, agent):
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Loss.")
    services.proposal_approve(actor=supervisor, proposal=proposal, note="Confirmed with the bank statement.")
    return {"proposal": proposal}


def test_peoples_decisions_by_default_and_plumbing_one_click_away(client, auditor, history):
    default = actions_on_page(get(client, auditor, reverse("web:audit_timeline")))
    assert "cases.proposal.approved" in default and "cases.proposal.created" not in default  # made by an agent
    everything = actions_on_page(get(client, auditor, reverse("web:audit_timeline") + "?scope=all"))
    assert "cases.proposal.created" in everything


def test_filters_by_actor_case_action_decision_and_date(client, auditor, analyst, supervisor, history):
    url = reverse("web:audit_timeline")
    assert set(actions_on_page(get(client, auditor, f"{url}?actor=user:{supervisor.pk}"))) == {
        "cases.proposal.approved", "cases.case.risk_changed"}
    assert actions_on_page(get(client, auditor, f"{url}?decision=approved")) == ["cases.proposal.approved"]
    assert actions_on_page(get(client, auditor, f"{url}?action=cases.evidence")) == ["cases.evidence.added"]
    reference = history["proposal"].case.reference
    assert len(actions_on_page(get(client, auditor, f"{url}?case={reference}"))) == 4
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    assert actions_on_page(get(client, auditor, f"{url}?date_from={tomorrow}")) == []
    today = timezone.localdate().isoformat()
    assert len(actions_on_page(get(client, auditor, f"{url}?date_from={today}&date_to={today}"))) == 4
    bad = get(client, auditor, f"{url}?case=CASE-1999-999999")
    assert bad.status_code == 400 and "No case CASE-1999-999999" in bad.content.decode()
    assert get(client, auditor, f"{url}?date_from={tomorrow}&date_to={today}").status_code == 400


def test_targets_are_linked_and_approval_notes_shown(client, auditor, history):
    html = get(client, auditor, reverse("web:audit_timeline")).content.decode()
    proposal = history["proposal"]
    assert f'href="/cases/{proposal.case.reference}/#proposal-{proposal.pk}"' in html
    assert "Confirmed with the bank statement." in html and "Proposal approved" in html


def test_a_case_trail_shows_its_chain_status_with_the_time_verified(client, auditor, case):
    html = get(client, auditor, reverse("web:case_audit", args=[case.reference])).content.decode()
    assert f"Hash chain of {case.reference}: <strong>intact</strong>" in html and "verified <time" in html


def test_a_broken_chain_is_shown_as_broken(client, auditor, case):
    event = AuditEvent.objects.filter(stream=f"case:{case.pk}").order_by("sequence").first()
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET action = %s WHERE id = %s", ["cases.case.forged", event.pk])
    html = get(client, auditor, reverse("web:case_audit", args=[case.reference])).content.decode()
    assert "<strong>broken</strong> at event 1" in html


def test_csv_and_json_lines_exports_stream_what_the_filter_selects(client, auditor, history, other_tenant):
    url = reverse("web:audit_export", args=["csv"]) + "?scope=all&action=cases.proposal"
    response = get(client, auditor, url)
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {r["action"] for r in rows} == {"cases.proposal.created", "cases.proposal.approved"}
    approved = next(r for r in rows if r["action"] == "cases.proposal.approved")
    assert json.loads(approved["payload"])["note"] == "Confirmed with the bank statement."
    response = get(client, auditor, reverse("web:audit_export", args=["jsonl"]))
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert lines and all(line["actor_type"] == "user" for line in lines)  # the default: people's decisions
    assert {line["tenant_id"] for line in lines} == {history["proposal"].tenant_id}
    assert get(client, auditor, reverse("web:audit_export", args=["xml"])).status_code == 404


def test_exports_are_for_auditors_only(client, analyst, case):
    assert get(client, analyst, reverse("web:audit_export", args=["csv"])).status_code == 403


# --- the hash-chain status of the streams in view: recorded by audit_verify, read ------

def chain_lines(response) -> dict[str, dict]:
    return {c["stream"]: c for c in response.context["chains"]}


def test_the_timeline_shows_each_streams_last_verification_and_what_was_appended_since(
        client, auditor, analyst, supervisor, history, tenant):
    from audit.verify import verify_ledger
    from tests.factories import make_case

    case = history["proposal"].case
    stream = f"case:{case.pk}"
    never = make_case(actor=analyst, title="Opened after the verification")
    verify_ledger([stream], since=True)  # what `audit_verify --since` records, for this stream only
    verified_to = AuditEvent.objects.filter(stream=stream).count()
    url = reverse("web:audit_timeline") + "?scope=all"
    lines = chain_lines(get(client, auditor, url))
    assert lines[stream]["state"] == "verified" and lines[stream]["sequence"] == verified_to
    assert lines[f"case:{never.pk}"]["state"] == "never"
    html = get(client, auditor, url).content.decode()
    assert f"Case {case.reference}: verified up to event {verified_to}, its latest, at <time" in html
    assert f"Case {never.reference}: never verified: none of its" in html

    services.case_transition(actor=supervisor, case=case, transition="triage", reason="read it")  # appends
    lines = chain_lines(get(client, auditor, url))
    appended = AuditEvent.objects.filter(stream=stream).count() - verified_to
    assert appended >= 1 and lines[stream]["state"] == "behind" and lines[stream]["appended"] == appended
    html = get(client, auditor, url).content.decode()
    assert (f"verified up to event {verified_to} at <time" in html
            and f"not verified since: {appended} event{'s' if appended > 1 else ''} appended since" in html)
    rows = {(e.stream, e.sequence): e.chain_verified for e in get(client, auditor, url).context["page"]}
    assert rows[(stream, verified_to)] is True and rows[(stream, verified_to + 1)] is False


def test_the_timeline_recomputes_no_hash(client, auditor, history, monkeypatch):
    import audit.verify
    import web.views.audit

    def forbidden(*args, **kwargs):
        raise AssertionError("the tenant timeline must not recompute hashes")

    monkeypatch.setattr(web.views.audit, "verify_stream", forbidden)
    monkeypatch.setattr(audit.verify, "verify_ledger", forbidden)
    monkeypatch.setattr(audit.verify, "row_hash", forbidden)  # the per-row hash of every verify path
    response = get(client, auditor, reverse("web:audit_timeline") + "?scope=all")
    assert response.status_code == 200 and response.context["chains"]


def test_a_long_case_stream_is_not_rechecked_on_page_load(client, auditor, case, monkeypatch):
    import web.views.audit

    monkeypatch.setattr(web.views.audit, "LIVE_VERIFY_MAX_EVENTS", 1)
    html = get(client, auditor, reverse("web:case_audit", args=[case.reference])).content.decode()
    assert "<strong>intact</strong>" not in html and "not re-checked on page load" in html
    assert f"Case {case.reference}: never verified" in html


def test_another_tenants_streams_and_verified_heads_are_not_shown(client, auditor, case, outsider, other_tenant):
    from audit.selectors import audit_chain_status
    from audit.verify import verify_ledger
    from tests.factories import make_case

    theirs = make_case(actor=outsider, title="Theirs")
    verify_ledger(since=True)
    their_stream = f"case:{theirs.pk}"
    assert audit_chain_status(tenant_id=case.tenant_id, streams=[their_stream, f"case:{case.pk}"]).keys() == {
        f"case:{case.pk}"}
    assert audit_chain_status(tenant_id=other_tenant.pk, streams=[their_stream]).keys() == {their_stream}
    response = get(client, auditor, reverse("web:audit_timeline") + "?scope=all")
    assert their_stream not in chain_lines(response) and f'data-stream="{their_stream}"' not in response.content.decode()
    assert set(chain_lines(response)) == {f"case:{case.pk}"}


@pytest.mark.parametrize("value", [None, "not a time", 5, "2026-13-45T00:00:00Z"])
def test_a_hand_edited_timeline_cursor_is_a_400_with_the_first_page(client, auditor, history, value):
    import base64

    token = base64.urlsafe_b64encode(json.dumps([value, 1]).encode()).decode().rstrip("=")
    response = get(client, auditor, reverse("web:audit_timeline") + f"?after={token}")
    assert response.status_code == 400 and "changed by hand" in response.content.decode()
    assert actions_on_page(response) == actions_on_page(get(client, auditor, reverse("web:audit_timeline")))


# --- one truthful status per stream, "Verify now", and changes in words ---------------------------

def verify_now(client, user, stream, next_url):
    client.force_login(user)
    return client.post(reverse("web:audit_verify_now"), {"stream": stream, "next": next_url})


def test_verify_now_verifies_the_stream_records_it_and_the_page_shows_one_status(client, auditor, supervisor,
                                                                                  case):
    from audit.models import AuditVerifiedHead

    stream, url = f"case:{case.pk}", reverse("web:audit_timeline") + "?scope=all"
    assert chain_lines(get(client, auditor, url))[stream]["state"] == "never"
    events = AuditEvent.objects.filter(stream=stream).count()

    response = verify_now(client, auditor, stream, url)

    assert response.status_code == 302 and response["Location"] == url
    head = AuditVerifiedHead.objects.get(stream=stream)
    assert head.sequence == events
    page = client.get(url)
    html = page.content.decode()
    assert f"Case {case.reference}: verified {events} events at" in html and "— intact." in html  # the message
    assert chain_lines(page)[stream]["state"] == "verified"
    line = html[html.index(f'data-stream="{stream}"'):]
    line = line[:line.index("</li>")]
    assert "its latest" in line and "— intact." in line and "never verified" not in line
    # A supervisor may too; the case's own trail shows its one status, and offers to record it.
    assert verify_now(client, supervisor, stream, url).status_code == 302
    trail = get(client, auditor, reverse("web:case_audit", args=[case.reference])).content.decode()
    assert trail.count('class="chain-line') == 0 and "<strong>intact</strong>" in trail and "Verify now" in trail


def test_verify_now_on_a_broken_stream_says_broken_and_keeps_saying_it(client, auditor, case):
    from audit.models import AuditVerifiedHead

    stream, url = f"case:{case.pk}", reverse("web:audit_timeline") + "?scope=all"
    verify_now(client, auditor, stream, url)
    recorded = AuditVerifiedHead.objects.get(stream=stream)
    event = AuditEvent.objects.filter(stream=stream).order_by("sequence").first()
    with triggers_disabled():
        raw_execute("UPDATE audit_auditevent SET action = %s WHERE id = %s", ["cases.case.forged", event.pk])

    verify_now(client, auditor, stream, url)

    page = client.get(url)
    html = page.content.decode()
    assert f"Case {case.reference}: broken at event 1" in html  # the message
    assert chain_lines(page)[stream]["state"] == "broken"
    line = html[html.index(f'data-stream="{stream}"'):]
    line = line[:line.index("</li>")]
    assert "<strong>broken</strong> at event 1" in line and "intact" not in line
    after = AuditVerifiedHead.objects.get(stream=stream)
    assert (after.sequence, after.verified_at) == (recorded.sequence, recorded.verified_at)  # not recorded as good


def test_verify_now_is_refused_to_analysts_and_for_another_tenants_stream(client, analyst, auditor, case, outsider):
    from audit.models import AuditVerifiedHead
    from tests.factories import make_case
    from tests.helpers import assert_nothing_changed

    theirs = make_case(actor=outsider, title="Theirs")
    url = reverse("web:audit_timeline")
    with assert_nothing_changed(extra={"verified heads": lambda: AuditVerifiedHead.objects.count()}):
        assert verify_now(client, analyst, f"case:{case.pk}", url).status_code == 403
        response = verify_now(client, auditor, f"case:{theirs.pk}", url)
        assert response.status_code == 302
        assert "not one of your organisation" in client.get(url).content.decode()
        verify_now(client, auditor, "no such stream", url)
    assert client.get(reverse("web:audit_verify_now")).status_code == 405


def test_audit_rows_say_what_changed_before_and_after(client, auditor, analyst, supervisor, case):
    services.case_transition(actor=analyst, case=case, transition="triage")
    proposal = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Loss.")
    services.proposal_approve(actor=supervisor, proposal=proposal)
    from django.utils.html import escape

    from cases.models import CaseEvent
    from web.templatetags.arbiter_ui import event_summary

    html = get(client, auditor, reverse("web:audit_timeline") + "?scope=all").content.decode()
    assert "Triage: new → triaged" in html
    # The very words of the case timeline, for each change.
    changes = CaseEvent.objects.filter(case=case, event_type__in=("case.transitioned", "case.risk_changed"))
    assert changes.count() == 2
    for event in changes:
        words = event_summary(event)
        assert "→" in words and f'<p class="change-words small">{escape(words)}</p>' in html
