"""Live progress without a reload: a running analysis says which step it is at; the case
page's runs section, once the runs it watches end, refreshes the proposals and notices sections out
of band; the notices section refreshes while a notice is on its way out; a person is told when a
run they started ends."""

import pytest
from django.urls import reverse

from cases import services
from runs import services as run_services
from runs.models import AgentRun, RunStatus
from tests.runs.conftest import drive
from web.live import notices_in_flight, run_progress

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


def test_a_running_run_says_step_n_of_m_and_the_node(analyst, case):
    run = run_services.run_start(actor=analyst, case=case)
    assert run_progress(run) is None  # queued: the queue position is shown instead
    AgentRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, next_sequence=3,
                                              current_node="risk_assessor")
    run.refresh_from_db()
    assert run_progress(run) == {"step": 3, "of": 8, "node": "Risk assessor"}


def test_when_a_watched_run_ends_the_sections_refresh_out_of_band(client, analyst, case):
    run = run_services.run_start(actor=analyst, case=case)
    client.force_login(analyst)
    url = reverse("web:case_runs", args=[case.reference])
    live = client.get(url, **HTMX).content.decode()
    assert f"watch={run.pk}" in live and 'hx-trigger="every 2s"' in live and "hx-swap-oob" not in live
    drive(run)
    done = client.get(f"{url}?watch={run.pk}", **HTMX).content.decode()
    assert '<div id="case-proposals-region" hx-swap-oob="true">' in done
    assert 'id="case-notices-region" hx-swap-oob="true"' in done
    assert f"Analysis R{run.pk} finished" in done and 'hx-trigger="every 2s"' not in done
    # A plain load of the section (nothing watched) does not refresh anything else.
    assert "hx-swap-oob" not in client.get(url, **HTMX).content.decode()


def test_the_notices_section_refreshes_while_a_notice_may_be_on_its_way_out(client, analyst, supervisor, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="S", body="B")
    assert not notices_in_flight([notice])
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash)
    notice.refresh_from_db()
    assert notices_in_flight([notice])
    client.force_login(analyst)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    assert f'hx-get="{reverse("web:case_live_notices", args=[case.reference])}"' in html
    region = client.get(reverse("web:case_live_notices", args=[case.reference]), **HTMX).content.decode()
    assert region.lstrip().startswith('<div id="case-notices-region"') and f'id="notice-{notice.pk}"' in region


def test_a_person_is_told_when_a_run_they_started_ends(client, analyst, analyst_b, case):
    client.force_login(analyst)
    url = reverse("web:notifications")
    first = client.get(url, **HTMX).content.decode().strip()
    # The first poll starts the clock: it announces nothing (it carries only the bell's unread
    # count, swapped out of band, none here).
    assert first == '<span id="bell-count" hx-swap-oob="true"></span>', first
    run = drive(run_services.run_start(actor=analyst, case=case))
    html = client.get(url, **HTMX).content.decode()
    assert f"R{run.pk} of {case.reference} finished" in html
    assert f"R{run.pk} of" not in client.get(url, **HTMX).content.decode()  # told once
    client.force_login(analyst_b)
    client.get(url, **HTMX)
    assert f"R{run.pk} of" not in client.get(url, **HTMX).content.decode()  # not theirs


# --- live lists: the "changed since" token the queue and the inbox poll --------------------------

def test_the_list_token_changes_with_a_case_and_costs_one_query(client, analyst, supervisor, outsider, case):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import make_case

    client.force_login(supervisor)
    url = reverse("web:list_changes")
    first = client.get(url).json()["token"]
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).json()["token"] == first  # nothing changed
    # the session, the user, the token: the token's own query is the only one that reads the ledger
    assert len(queries) <= 3, [q["sql"] for q in queries]
    assert sum("audit_auditevent" in q["sql"] for q in queries) == 1
    services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Large loss.")
    second = client.get(url).json()["token"]
    assert second != first
    make_case(actor=outsider, title="Another tenant's case")  # not ours: the token stays
    assert client.get(url).json()["token"] == second
    response = client.get(url)
    assert response["Cache-Control"] == "no-store"


def test_the_queue_and_the_inbox_carry_the_live_list(client, supervisor, case):
    client.force_login(supervisor)
    for name, kind in (("web:case_list", "queue"), ("web:review_inbox", "inbox")):
        html = client.get(reverse(name)).content.decode()
        assert f'data-live-list="{kind}"' in html and 'id="live-bar"' in html and "js/live-lists.js" in html
