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
