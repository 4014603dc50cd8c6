"""The case page judged at a glance: the narrative first and in full, evidence previews,
a proposal's cited quote marked in its evidence, proposal cards in words."""

import re

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from cases import services
from cases.models import CaseEvent
from runs import services as run_services
from tests.factories import make_case
from tests.runs.conftest import drive
from web.evidence_preview import PREVIEW_CHARS, find_quote, parse_quote_key, preview

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
NARRATIVE = ("Someone opened two credit cards in my name; I lost $2,400 <b>and</b> the bank & its\n"
             "agents ignore me.\n\nI   called them  five times.")


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: None)


def visible_text(html: str) -> str:
    """The words a person reads: tags, attribute values and scripts removed."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def analysed_case(analyst):
    case = make_case(actor=analyst, title="Identity theft", narrative=NARRATIVE)
    drive(run_services.run_start(actor=analyst, case=case))
    return case


# --- the highlighter -----------------------------------------------------------------------------------

def test_a_quote_is_found_modulo_whitespace_and_typographic_quotes_as_citations_are_verified():
    text = "He said:\n  “refund   me”\tnow, please.\n"
    start, end = find_quote(text, '"refund me" now')
    assert text[start:end] == "“refund   me”\tnow"
    assert find_quote(text, "He said: “refund me” now, please…") is not None  # a shortened quote: a prefix
    assert find_quote(text, "refund you") is None
    assert find_quote(text, "He said") is None  # shorter than agents.citations.MIN_QUOTE_CHARS
    assert find_quote(text, "HE SAID: “REFUND ME”") is None  # citations are not verified case-blind either


def test_the_marked_preview_escapes_the_text_and_the_quote_before_marking():
    text = 'Intro <script>alert(1)</script> then: fees & "charges" <i>doubled</i> here.'
    shown = preview(text, quote='fees & "charges" <i>doubled</i>', mark_id="quote-mark")
    assert shown.marked
    assert str(shown.html) == ('Intro &lt;script&gt;alert(1)&lt;/script&gt; then: <mark id="quote-mark" tabindex="-1" '
                               'data-focus-after-swap>fees &amp; &quot;charges&quot; &lt;i&gt;doubled&lt;/i&gt;</mark>'
                               ' here.')
    unmarked = preview(text, quote="not in the text at all")
    assert not unmarked.marked and "<mark" not in unmarked.html and "&lt;script&gt;" in unmarked.html


def test_a_long_text_shows_the_passage_around_the_quote():
    text = "a" * 10_000 + " the exact words cited here " + "b" * 10_000
    plain = preview(text)
    assert len(plain.html) == PREVIEW_CHARS and plain.truncated_after and not plain.truncated_before
    shown = preview(text, quote="the exact words cited here", mark_id="m")
    assert shown.marked and shown.truncated_before and shown.truncated_after
    assert ">the exact words cited here</mark>" in shown.html and len(shown.html) < 5000


def test_quote_keys_are_parsed_strictly():
    assert parse_quote_key("12.0") == (12, 0)
    for bad in ("", "12", "12.x", "-1.0", "1.0; DROP", "1" * 13 + ".0", " 1.0"):
        assert parse_quote_key(bad) is None


# --- the page ------------------------------------------------------------------------------------------

def test_the_narrative_comes_first_and_in_full(client, analyst):
    case = make_case(actor=analyst, title="Long story", narrative="First line.\n" + "More words. " * 600 + "LAST")
    client.force_login(analyst)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    main = html[html.index('class="case-main"'):]
    assert main.index('id="narrative"') < main.index('id="status"') < main.index('id="proposals"')
    narrative = main[main.index('id="narrative"'):main.index("</section>")]
    assert "<details" not in narrative and "LAST" in narrative  # expanded, not cut
    evidence = html[html.index('id="evidence"'):]
    assert "shown in full at the top of the page" in evidence


def test_a_bytes_literal_narrative_is_shown_decoded(client, analyst):
    case = make_case(actor=analyst, title="Exported", narrative="b'My card was charged twice \\xe2\\x80\\x94 twice!'")
    client.force_login(analyst)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    narrative = html[html.index('id="narrative"'):]
    assert "My card was charged twice — twice!" in narrative[:narrative.index("</section>")]


def test_an_agent_proposal_card_says_from_to_a_plain_rationale_first_and_links_its_quotes(client, analyst,
                                                                                           supervisor):
    case = analysed_case(analyst)
    risk = case.proposals.get(kind="risk_level")
    client.force_login(supervisor)
    response = client.get(reverse("web:case_detail", args=[case.reference]))
    html = response.content.decode()
    card = html[html.index(f'<article id="proposal-{risk.pk}"'):]
    card = card[:card.index("</article>")]
    text = " ".join(visible_text(card).split())
    assert text.startswith("Risk level: Unassessed → to Critical Waiting for a decision Critical risk because of:")
    assert "Identity theft" in text and "FRAUD-ID +3" not in text.split("The full reasoning")[0]
    assert re.search(r'<details class="machine-detail"><summary>The full reasoning the agents recorded</summary>'
                     r'<p class="small">.*FRAUD-ID \+3', card, flags=re.S)
    quotes = response.context["proposals"][[p.pk for p in response.context["proposals"]].index(risk.pk)].cited_quotes
    assert [q.key for q in quotes] == [f"{risk.pk}.0", f"{risk.pk}.1"]
    assert f'href="?quote={risk.pk}.0#quote-mark"' in card
    assert f'hx-get="/cases/{case.reference}/?quote={risk.pk}.1"' in card
    assert "“I called them five times.”" in text


def test_following_a_quote_link_marks_the_quoted_span_in_its_evidence(client, analyst, supervisor):
    case = analysed_case(analyst)
    risk = case.proposals.get(kind="risk_level")
    client.force_login(supervisor)
    url = reverse("web:case_detail", args=[case.reference])
    html = client.get(f"{url}?quote={risk.pk}.1").content.decode()
    narrative = html[html.index('id="narrative"'):]
    narrative = narrative[:narrative.index("</section>")]
    # The quote was verified modulo whitespace: the mark covers the text as written, spaces and all.
    assert '<mark id="quote-mark" tabindex="-1" data-focus-after-swap>I   called them  five times.</mark>' in narrative
    assert html.count("<mark") == 1
    # The first quote spans a line break and HTML-looking text: escaped, then marked.
    html = client.get(f"{url}?quote={risk.pk}.0").content.decode()
    assert ('data-focus-after-swap>Someone opened two credit cards in my name; I lost $2,400 &lt;b&gt;and&lt;/b&gt; '
            'the bank &amp; its\nagents ignore me.</mark>') in html
    # Through htmx the answer is the case body alone, swapped in place.
    response = client.get(f"{url}?quote={risk.pk}.1", **HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body and 'id="case-body"' in body
    assert '<mark id="quote-mark"' in body


@pytest.mark.parametrize("key", ["999.0", "x", "1.99", "1.0.0"])
def test_a_quote_link_naming_no_cited_quote_is_a_400_with_a_note_and_changes_nothing(client, analyst, supervisor,
                                                                                    key):
    case = analysed_case(analyst)
    client.force_login(supervisor)
    events, audit = CaseEvent.objects.count(), AuditEvent.objects.count()
    response = client.get(reverse("web:case_detail", args=[case.reference]) + f"?quote={key}")
    html = response.content.decode()
    assert response.status_code == 400
    assert "That link names a quote this case&#x27;s proposals do not cite, so nothing is highlighted." in html
    assert "<mark" not in html
    assert (CaseEvent.objects.count(), AuditEvent.objects.count()) == (events, audit)


def test_another_case_s_quote_is_not_marked_here(client, analyst, supervisor):
    first, second = analysed_case(analyst), analysed_case(analyst)
    theirs = first.proposals.get(kind="risk_level")
    client.force_login(supervisor)
    response = client.get(reverse("web:case_detail", args=[second.reference]) + f"?quote={theirs.pk}.0")
    assert response.status_code == 400 and "<mark" not in response.content.decode()


def test_a_decided_proposal_shows_the_decision_and_the_approver_s_note_in_words(client, analyst, supervisor, agent):
    case = make_case(actor=analyst)
    proposal = services.proposal_create(actor=agent, case=case, kind="status_transition",
                                        payload={"transition": "triage"}, rationale="Ready for triage.")
    services.proposal_approve(actor=supervisor, proposal=proposal, note="Checked the statement.")
    client.force_login(analyst)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    card = html[html.index(f'<article id="proposal-{proposal.pk}"'):]
    text = " ".join(visible_text(card[:card.index("</article>")]).split())
    assert "Status: New → to Triaged" in text
    assert "Applied by supervisor on" in text and "Their note: “Checked the statement.”" in text


def test_no_internal_id_or_stored_value_in_the_case_page_text(client, analyst, supervisor, agent):
    case = analysed_case(analyst)
    stale = services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "low"},
                                     rationale="Small.")
    services.proposal_create(actor=agent, case=case, kind="assignment", payload={"assignee_id": analyst.pk},
                             rationale="Theirs.")
    rival = case.proposals.get(kind="risk_level", proposer_type="agent")
    services.proposal_approve(actor=supervisor, proposal=rival)
    notice = services.notice_draft(actor=analyst, case=case, subject="Hello", body="We are on it.")
    services.notice_submit(actor=analyst, notice=notice)
    client.force_login(supervisor)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    text = visible_text(html)
    for raw in ("user:", "agent:", "pending_approval", "risk_level", "status_transition", "under_review",
                "unassessed", "case.transitioned"):
        assert raw not in text, raw
    card = html[html.index(f'<article id="proposal-{stale.pk}"'):]
    card_text = " ".join(visible_text(card[:card.index("</article>")]).split())
    assert "Out of date: risk level changed" in card_text
    assert "The risk level changed from Unassessed to Critical after this proposal was made" in card_text
    assert "Assignment: nobody → to analyst" in " ".join(text.split())


def test_an_approved_notice_shows_the_approver_s_note_and_its_status_in_words(client, analyst, supervisor, case):
    notice = services.notice_draft(actor=analyst, case=case, subject="Hello", body="We are on it.")
    services.notice_submit(actor=analyst, notice=notice)
    services.notice_approve(actor=supervisor, notice=notice, content_hash=notice.content_hash,
                            note="Fine; send it today.")
    client.force_login(analyst)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    card = html[html.index(f'<article id="notice-{notice.pk}"'):]
    text = " ".join(visible_text(card[:card.index("</article>")]).split())
    assert "Approved by supervisor on" in text and "Their note: “Fine; send it today.”" in text


def test_the_case_page_with_quotes_reads_the_same_queries_after_more_runs(client, analyst, supervisor):
    from tests.web.test_list_queries import count_queries

    case = analysed_case(analyst)
    url = reverse("web:case_detail", args=[case.reference])
    quote = f"{case.proposals.get(kind='risk_level').pk}.0"
    before = (count_queries(client, supervisor, url), count_queries(client, supervisor, f"{url}?quote={quote}"))
    for _ in range(2):  # reject what is pending so the next analysis proposes again
        for proposal in case.proposals.filter(status="pending"):
            services.proposal_reject(actor=supervisor, proposal=proposal, note="Again, please.")
        drive(run_services.run_start(actor=analyst, case=case))
    assert case.proposals.exclude(run_id="").count() >= 6
    after = (count_queries(client, supervisor, url), count_queries(client, supervisor, f"{url}?quote={quote}"))
    assert after == before


def test_a_quote_from_a_pdf_is_marked_in_its_extracted_text(client, analyst, supervisor,
                                                           django_capture_on_commit_callbacks):
    from tests.cases.test_extraction import add_and_extract, text_pdf

    case = make_case(actor=analyst, title="Charges I never made", narrative="See the attached statement.")
    pdf = add_and_extract(case, analyst, text_pdf("Statement of account for March.",
                                                  "Someone opened an account in my name and I lost $2,400 <to> "
                                                  "charges I never made."),
                          django_capture_on_commit_callbacks)
    drive(run_services.run_start(actor=analyst, case=case))
    risk = case.proposals.get(kind="risk_level")
    client.force_login(supervisor)
    response = client.get(reverse("web:case_detail", args=[case.reference]))
    quotes = {p.pk: p.cited_quotes for p in response.context["proposals"]}[risk.pk]
    from_pdf = [q for q in quotes if q.evidence_id == pdf.pk]
    assert from_pdf, quotes
    html = client.get(reverse("web:case_detail", args=[case.reference]) + f"?quote={from_pdf[0].key}").content.decode()
    item = html[html.index(f'<li id="evidence-{pdf.pk}"'):]
    item = item[:item.index("</li>")]
    assert '<details class="evidence-text" data-extraction="readable" open>' in item
    assert re.search(r'<mark id="quote-mark" tabindex="-1" data-focus-after-swap>[^<]*\$2,400 &lt;to&gt;', item), item


def test_rationale_parts_fold_an_agent_s_machine_detail_but_keep_a_person_s_words():
    from web.case_page import rationale_parts

    agent_text = "The loss is above $1,000.\nRisk rationale: MONEY-LOSS +2 (E1) = 2 point(s)."
    assert rationale_parts(agent_text) == ("The loss is above $1,000.",
                                           "Risk rationale: MONEY-LOSS +2 (E1) = 2 point(s).")
    person = "Two charges.\nBoth on the statement."
    assert rationale_parts(person, by_agent=False) == (person, "")
    long = "First sentence is here. " * 40
    short, rest = rationale_parts(long, by_agent=False)
    assert short.endswith("here.") and len(short) <= 600 and rest.startswith("First sentence")
    assert (short + " " + rest).split() == long.split()  # nothing lost between the two parts
    listed = "Risk high because of: " + "; ".join(f"signal number {n} of the list" for n in range(12)) + "."
    short, rest = rationale_parts(listed)
    assert short.endswith("of the list …") and not short.endswith(";") and len(short) <= 300
    assert rest.startswith("signal number") and (short[:-2] + "; " + rest).split() == listed.split()


def test_a_text_file_s_content_is_previewed_escaped_and_a_missing_file_is_no_500(client, analyst):
    from django.core.files.uploadedfile import SimpleUploadedFile

    case = make_case(actor=analyst, title="Letters", narrative="See the attached letter.")
    upload = SimpleUploadedFile("letter.txt", b"Dear consumer, <b>we</b> will call you daily.",
                                content_type="text/plain")
    letter = services.evidence_add(actor=analyst, case=case, title="Collector's letter", upload=upload)
    client.force_login(analyst)
    html = client.get(reverse("web:case_detail", args=[case.reference])).content.decode()
    item = html[html.index(f'<li id="evidence-{letter.pk}"'):]
    item = item[:item.index("</li>")]
    assert 'data-preview="file"' in item and "Dear consumer, &lt;b&gt;we&lt;/b&gt; will call you daily." in item

    letter.file.storage.delete(letter.file.name)  # the stored file is gone (an operator's mistake)
    response = client.get(reverse("web:case_detail", args=[case.reference]))
    assert response.status_code == 200 and 'data-preview="file"' not in response.content.decode()


# --- Withdraw: the proposer's side, explained ----------------------------------------------------------

def test_withdraw_is_the_proposers_side_and_says_what_it_does(client, analyst, supervisor):
    case = make_case(actor=analyst, title="Fee charged twice", narrative="")
    services.proposal_create(actor=analyst, case=case, kind="risk_level", payload={"risk_level": "high"},
                             rationale="Large loss.")
    notice = services.notice_draft(actor=analyst, case=case, subject="About your complaint", body="We are on it.")
    services.notice_submit(actor=analyst, notice=notice)
    url = reverse("web:case_detail", args=[case.reference])

    client.force_login(supervisor)
    page = visible_text(client.get(url).content.decode())
    assert "Approve and apply" in page
    assert "Withdraw" not in page  # a supervisor who decides approves or rejects; nothing unexplained beside them

    client.force_login(analyst)
    page = " ".join(visible_text(client.get(url).content.decode()).split())
    assert "Withdraw proposal" in page
    assert "Withdrawing takes the proposal back before anyone decides it" in page
    assert "Withdraw notice" in page and "Withdrawing stops this notice: it will not be sent" in page
