"""Browser pages for threads: the list, the case page's threads section, a thread's messages with
pending replies, answers with what they cited and created, drift, redaction, compaction — per
persona, tenant isolation, refusals that change nothing, bounded queries on a long thread."""

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from cases import services as case_services
from cases.models import Proposal, ProposalStatus
from conversations import services
from conversations.models import Message, MessageRedaction, Thread, ThreadSummary
from runs.models import AgentRun, MemoryRecord, RunStatus
from tests.conversations.conftest import drive, fill_thread, post_and_answer
from tests.factories import make_case
from tests.helpers import assert_nothing_changed, bring_case_to

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def enqueued(monkeypatch):
    """Steps the code enqueues; nothing reaches a broker. Tests drive runs through the executor."""
    calls = []
    monkeypatch.setattr("runs.tasks.enqueue_step", lambda run_id, **kw: calls.append(run_id))
    return calls


@pytest.fixture
def thread(analyst, case):
    return services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Refund dispute")


def conversation_rows() -> dict:
    """What a refused action on a thread must not write (for assert_nothing_changed's extra)."""
    return {"threads": lambda: Thread.objects.count(), "messages": lambda: Message.objects.count(),
            "redactions": lambda: MessageRedaction.objects.count(), "runs": lambda: AgentRun.objects.count(),
            "summaries": lambda: ThreadSummary.objects.count(), "memory": lambda: MemoryRecord.objects.count()}


def get(client, user, url, **extra):
    client.force_login(user)
    return client.get(url, **extra)


def post(client, user, url, data=None, **extra):
    client.force_login(user)
    return client.post(url, data or {}, **extra)


def thread_url(thread, name="web:thread_detail", *args):
    return reverse(name, args=[thread.pk, *args])


# --- thread list and creation ------------------------------------------------------------------

@pytest.mark.parametrize("persona,may_open", [("analyst", True), ("supervisor", True), ("auditor", False),
                                              ("admin_user", False)])
def test_the_thread_list_renders_for_every_persona(client, request, persona, may_open, thread):
    response = get(client, request.getfixturevalue(persona), reverse("web:thread_list"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Refund dispute" in html and thread.case.reference in html
    assert ('<button type="submit" class="button button--primary">Open thread</button>' in html) is may_open


def test_the_thread_list_shows_only_this_tenants_threads_and_filters_by_case(client, analyst, outsider, thread):
    other = make_case(actor=analyst, title="Another complaint")
    services.thread_create(actor=analyst, tenant=analyst.tenant, case=other, title="About the other one")
    theirs = make_case(actor=outsider, title="Theirs")
    services.thread_create(actor=outsider, tenant=outsider.tenant, case=theirs, title="Outsider's secret thread")
    html = get(client, analyst, reverse("web:thread_list")).content.decode()
    assert "Refund dispute" in html and "About the other one" in html and "secret" not in html
    filtered = get(client, analyst, reverse("web:thread_list") + f"?case={thread.case.reference}")
    assert [t.pk for t in filtered.context["page"]] == [thread.pk]
    assert get(client, analyst, reverse("web:thread_list") + "?case=CASE-1999-000009").status_code == 404


def test_opening_a_thread_about_a_case_from_the_list(client, analyst, case):
    response = post(client, analyst, reverse("web:thread_list"), {"title": "Escrow question", "case": case.reference})
    thread = Thread.objects.get(title="Escrow question")
    assert response.status_code == 302 and response["Location"] == thread_url(thread)
    assert (thread.case_id, thread.created_by_id) == (case.pk, analyst.pk)
    assert "Thread “Escrow question” opened" in get(client, analyst, thread_url(thread)).content.decode()


def test_opening_a_thread_about_an_unknown_case_says_so_and_changes_nothing(client, analyst, outsider):
    theirs = make_case(actor=outsider, title="Theirs")
    with assert_nothing_changed(extra=conversation_rows()):
        response = post(client, analyst, reverse("web:thread_list"), {"title": "Snooping", "case": theirs.reference})
    assert response.status_code == 404
    assert f"There is no case {theirs.reference} in your organisation" in response.content.decode()


def test_opening_a_thread_without_a_title_is_invalid_and_changes_nothing(client, analyst):
    with assert_nothing_changed(extra=conversation_rows()):
        response = post(client, analyst, reverse("web:thread_list"), {"title": ""})
    assert response.status_code == 400 and "Give the thread a title." in response.content.decode()


def test_an_auditor_cannot_open_a_thread_and_nothing_changes(client, auditor):
    with assert_nothing_changed(extra=conversation_rows()):
        response = post(client, auditor, reverse("web:thread_list"), {"title": "Just looking"})
    assert response.status_code == 403
    assert "Your role (auditor) cannot open conversation threads" in response.content.decode()


# --- the case page's threads section -----------------------------------------------------------

def test_the_case_page_lists_its_threads_and_offers_to_start_one(client, analyst, auditor, case, thread):
    page = get(client, analyst, reverse("web:case_detail", args=[case.reference])).content.decode()
    assert "Start a thread about this case" in page and f"Questions about {case.reference}" in page
    section = get(client, analyst, reverse("web:case_threads", args=[case.reference])).content.decode()
    assert f'href="{thread_url(thread)}"' in section and "Refund dispute" in section
    page = get(client, auditor, reverse("web:case_detail", args=[case.reference])).content.decode()
    assert "Start a thread about this case" not in page


def test_starting_a_thread_from_the_case_page_opens_it(client, analyst, case):
    response = post(client, analyst, reverse("web:case_thread_create", args=[case.reference]),
                    {"title": "Is a refund due?"}, **HTMX)
    thread = Thread.objects.get()
    assert response["HX-Redirect"] == thread_url(thread) and thread.case_id == case.pk
    response = post(client, analyst, reverse("web:case_thread_create", args=[case.reference]), {"title": "Again"})
    assert response.status_code == 302 and Thread.objects.count() == 2


def test_an_auditor_cannot_start_a_thread_from_the_case_page_and_nothing_changes(client, auditor, case):
    with assert_nothing_changed(case, extra=conversation_rows()):
        response = post(client, auditor, reverse("web:case_thread_create", args=[case.reference]),
                        {"title": "Just looking"})
    assert response.status_code == 403
    assert "cannot open conversation threads" in response.content.decode()


def test_another_tenants_case_threads_are_404(client, outsider, case):
    with assert_nothing_changed(case, extra=conversation_rows()):
        assert post(client, outsider, reverse("web:case_thread_create", args=[case.reference]),
                    {"title": "x"}).status_code == 404
    assert get(client, outsider, reverse("web:case_threads", args=[case.reference])).status_code == 404


# --- a thread's page ---------------------------------------------------------------------------

@pytest.mark.parametrize("persona,may_post", [("analyst", True), ("supervisor", True), ("auditor", False),
                                              ("admin_user", False)])
def test_the_thread_page_renders_for_every_persona(client, request, persona, may_post, thread, analyst):
    post_and_answer(thread, analyst, "What is this complaint about?")
    response = get(client, request.getfixturevalue(persona), thread_url(thread))
    assert response.status_code == 200
    html = response.content.decode()
    assert "What is this complaint about?" in html and 'id="message-2"' in html
    assert ('name="content"' in html) is may_post
    if persona == "auditor":
        assert "Auditors read threads; they do not post in them." in html


@pytest.mark.parametrize("name,method,args", [
    ("web:thread_detail", "get", ()), ("web:thread_pending", "get", ()), ("web:thread_message_post", "post", ()),
    ("web:thread_compact", "post", ()), ("web:thread_message_redact", "post", (1,)),
])
def test_another_tenants_thread_is_404_and_nothing_changes(client, outsider, thread, analyst, name, method, args):
    question = services.message_post(actor=analyst, thread=thread, content="Hello")
    args = (question.pk,) if args else ()
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        call = client.get if method == "get" else client.post
        client.force_login(outsider)
        response = call(thread_url(thread, name, *args), {"content": "Hi", "reason": "x"})
    assert response.status_code == 404


def test_messages_are_shown_in_order_with_the_latest_summary_marker(client, analyst, thread):
    fill_thread(thread, 20, author=analyst)
    run = services.thread_compact(actor=analyst, thread=thread)
    drive(run.pk)
    summary = ThreadSummary.objects.get(thread=thread)
    html = get(client, analyst, thread_url(thread)).content.decode()
    positions = [html.index(f'id="message-{n}"') for n in range(1, 21)]
    assert positions == sorted(positions)
    marker = f"Turns {summary.from_sequence}–{summary.to_sequence} summarised for the assistant"
    assert marker in html
    assert html.index(f'id="message-{summary.to_sequence}"') < html.index(marker) \
        < html.index(f'id="message-{summary.to_sequence + 1}"')
    assert "message 1: " in html  # the originals stay visible
    assert f"Turns {summary.from_sequence}–{summary.to_sequence} are summarised" in html  # the aside


def test_a_redacted_message_reads_redacted_with_who_and_when(client, analyst, supervisor, thread):
    question = services.message_post(actor=analyst, thread=thread, content="My card number is 4111 1111 1111 1111")
    services.message_redact(actor=supervisor, message=question, reason="Card number")
    html = get(client, analyst, thread_url(thread)).content.decode()
    assert "4111" not in html
    assert '<p class="message-content redacted">[redacted]</p>' in html
    assert "Redacted by supervisor on " in html and ": Card number" in html


# --- posting and the pending reply -------------------------------------------------------------

def test_posting_shows_the_pending_reply_and_polling_appends_the_answer(client, analyst, thread,
                                                                        django_capture_on_commit_callbacks, enqueued):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, analyst, thread_url(thread, "web:thread_message_post"),
                        {"content": "What does the consumer ask for?"}, **HTMX)
    assert response.status_code == 200
    question = Message.objects.get(thread=thread)
    run = AgentRun.objects.get(pk=int(question.reply_run_id))
    assert (run.graph, run.status, enqueued) == ("chat", RunStatus.QUEUED, [run.pk])
    html = response.content.decode()
    assert "Message #1 posted; the assistant is replying." in html
    assert "The assistant is replying to #1…" in html
    poll = f'hx-get="{thread_url(thread, "web:thread_pending")}?after=1" hx-trigger="every 2s"'
    assert poll in html
    # Still pending: the poll answers with the same block.
    pending = get(client, analyst, thread_url(thread, "web:thread_pending") + "?after=1").content.decode()
    assert "hx-swap-oob" not in pending and 'hx-trigger="every 2s"' in pending
    drive(run.pk)
    answered = get(client, analyst, thread_url(thread, "web:thread_pending") + "?after=1").content.decode()
    assert '<div hx-swap-oob="beforeend:#message-list">' in answered and 'id="message-2"' in answered
    assert "The assistant is replying" not in answered and 'hx-trigger="every 2s"' not in answered
    # The thread's message count follows the replies that arrive (swapped in out of band).
    assert '<span id="message-count" class="muted small" hx-swap-oob="true">(2 messages)</span>' in answered


def test_posting_without_javascript_redirects_to_the_thread(client, analyst, thread):
    response = post(client, analyst, thread_url(thread, "web:thread_message_post"), {"content": "Hello"})
    assert response.status_code == 302 and response["Location"] == thread_url(thread)
    assert Message.objects.filter(thread=thread).count() == 1


def test_an_empty_message_is_refused_and_nothing_changes(client, analyst, thread):
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, analyst, thread_url(thread, "web:thread_message_post"), {"content": ""}, **HTMX)
    assert response.status_code == 400 and "Write something to send." in response.content.decode()


def test_an_over_long_message_is_refused_with_the_limit(client, analyst, thread, settings):
    settings.CONVERSATIONS_MESSAGE_MAX_CHARS = 100
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, analyst, thread_url(thread, "web:thread_message_post"), {"content": "x" * 150})
    assert response.status_code == 400 and "At most 100 characters." in response.content.decode()


def test_an_auditor_cannot_post_and_nothing_changes(client, auditor, thread):
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, auditor, thread_url(thread, "web:thread_message_post"), {"content": "Hi"}, **HTMX)
    assert response.status_code == 403
    assert "Your role (auditor) cannot post in conversation threads" in response.content.decode()


def test_a_failed_reply_says_so_and_points_to_its_run(client, analyst, thread):
    question = services.message_post(actor=analyst, thread=thread, content="Hello")
    run = AgentRun.objects.get(pk=int(question.reply_run_id))
    from runs import services as run_services

    run_services.run_cancel(actor=analyst, run=run)
    html = get(client, analyst, thread_url(thread)).content.decode()
    assert "The assistant could not answer #1: its run" in html and f"R{run.pk}</a> is cancelled" in html
    assert 'hx-trigger="every 2s"' not in html


# --- what an answer cited and created, and drift -----------------------------------------------

def test_an_intent_shows_the_proposal_and_that_approval_is_required(client, analyst, supervisor, case, thread):
    bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    question, reply, run = post_and_answer(thread, analyst, "please close the case")
    proposal = Proposal.objects.get(run_id=str(run.pk))
    response = get(client, analyst, thread_url(thread))
    html = response.content.decode()
    assert f'href="/cases/{case.reference}/#proposal-{proposal.pk}">Proposal P{proposal.pk}</a>' in html
    assert "Approval required by a supervisor." in html
    case.refresh_from_db()
    assert f"as <strong>decided</strong>, version {case.version}" in html
    assert case.status == "decided"  # the intent changed nothing
    assert f'href="/runs/{run.pk}/"' in html  # how the answer was made
    # The supervisor who asked is told another supervisor decides (four eyes). On an open case: a
    # decided one takes no risk proposal any more.
    open_case = make_case(actor=analyst, title="Still open")
    own_thread = services.thread_create(actor=supervisor, tenant=supervisor.tenant, case=open_case, title="Mine")
    _q, _r, run2 = post_and_answer(own_thread, supervisor, "set the risk level to high")
    html = get(client, supervisor, thread_url(own_thread)).content.decode()
    assert "Not by you: you asked for it (four eyes)." in html


def test_an_answer_whose_cited_facts_changed_is_marked_out_of_date(client, analyst, supervisor, case, thread):
    bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    _question, reply, run = post_and_answer(thread, analyst, "please close the case")
    html = get(client, analyst, thread_url(thread)).content.decode()
    assert "Out of date" not in html
    cited_version = reply.cited_case_version
    proposal = Proposal.objects.get(run_id=str(run.pk))
    case_services.proposal_approve(actor=supervisor, proposal=proposal, note="Agreed",
                                   confirm_reason="No notice: test.")  # Closing without a notice
    assert Proposal.objects.get(pk=proposal.pk).status == ProposalStatus.APPLIED
    case.refresh_from_db()
    html = get(client, analyst, thread_url(thread)).content.decode()
    assert "Out of date:" in html
    assert f"being decided at version {cited_version}; it is now closed at version {case.version}" in html


def test_a_memory_request_shows_the_proposed_memory_and_who_confirms_it(client, analyst, thread):
    _q, _reply, _run = post_and_answer(thread, analyst, "Remember that I prefer short summaries.")
    memory = MemoryRecord.objects.get()
    html = get(client, analyst, thread_url(thread)).content.decode()
    assert f'href="/memory/#memory-{memory.pk}">Memory M{memory.pk}</a>' in html
    assert "Confirmation required by the person it is about, or a supervisor" in html


# --- redaction ---------------------------------------------------------------------------------

def test_the_author_redacts_their_message(client, analyst, thread):
    question = services.message_post(actor=analyst, thread=thread, content="Call me on 555-0100")
    response = post(client, analyst, thread_url(thread, "web:thread_message_redact", question.pk),
                    {"reason": "Phone number"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "555-0100" not in html and f"Message #{question.sequence} redacted" in html
    redaction = MessageRedaction.objects.get(message=question)
    assert (redaction.reason, redaction.redacted_by) == ("Phone number", f"user:{analyst.pk}")
    assert AuditEvent.objects.filter(action="conversations.message.redacted").count() == 1


def test_a_supervisor_redacts_anyones_message_but_another_analyst_cannot(client, analyst, analyst_b, supervisor,
                                                                         thread):
    question = services.message_post(actor=analyst, thread=thread, content="Sensitive")
    html = get(client, analyst_b, thread_url(thread)).content.decode()
    assert "Redact…" not in html  # not offered to another analyst
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, analyst_b, thread_url(thread, "web:thread_message_redact", question.pk),
                        {"reason": "Because"}, **HTMX)
    assert response.status_code == 403
    assert "can redact only your own messages; a supervisor can redact this one" in response.content.decode()
    response = post(client, supervisor, thread_url(thread, "web:thread_message_redact", question.pk),
                    {"reason": "Personal data"})
    assert response.status_code == 302 and MessageRedaction.objects.filter(message=question).exists()


def test_redacting_twice_or_without_a_reason_is_refused_and_nothing_changes(client, analyst, thread):
    question = services.message_post(actor=analyst, thread=thread, content="Oops")
    url = thread_url(thread, "web:thread_message_redact", question.pk)
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, analyst, url, {"reason": ""}, **HTMX)
    assert response.status_code == 400 and "A reason is required." in response.content.decode()
    services.message_redact(actor=analyst, message=question, reason="Typo")
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, analyst, url, {"reason": "Again"})
    assert response.status_code == 409 and "This message is already redacted." in response.content.decode()


def test_a_message_of_another_thread_cannot_be_redacted_through_this_one(client, analyst, thread, case):
    other = services.thread_create(actor=analyst, tenant=analyst.tenant, case=case, title="Other")
    message = services.message_post(actor=analyst, thread=other, content="Elsewhere")
    with assert_nothing_changed(case, extra=conversation_rows()):
        response = post(client, analyst, thread_url(thread, "web:thread_message_redact", message.pk),
                        {"reason": "x"})
    assert response.status_code == 404


# --- compaction --------------------------------------------------------------------------------

def test_compacting_a_long_thread_starts_a_summary_run(client, analyst, thread):
    fill_thread(thread, 20, author=analyst)
    response = post(client, analyst, thread_url(thread, "web:thread_compact"), **HTMX)
    assert response.status_code == 200
    run = AgentRun.objects.get(graph="thread_compaction")
    assert run.thread_id == thread.pk and run.status == RunStatus.QUEUED
    assert f"Compaction run R{run.pk} is summarising turns 1–14; the originals stay visible here." \
        in response.content.decode()


def test_compacting_a_short_thread_is_refused_and_nothing_changes(client, analyst, thread):
    fill_thread(thread, 4, author=analyst)
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, analyst, thread_url(thread, "web:thread_compact"), **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert "Nothing to compact: the last 6 messages always stay verbatim" in html and 'id="action-error"' in html


def test_an_auditor_cannot_compact_and_nothing_changes(client, auditor, analyst, thread):
    fill_thread(thread, 20, author=analyst)
    with assert_nothing_changed(thread.case, extra=conversation_rows()):
        response = post(client, auditor, thread_url(thread, "web:thread_compact"))
    assert response.status_code == 403 and "cannot compact conversation threads" in response.content.decode()


# --- bounded queries -----------------------------------------------------------------------------

def answered_history(thread: Thread, *, pairs: int, author, start: int) -> None:
    """A long, realistic history fast: `pairs` questions each with its answer (bulk inserts,
    bypassing the services on purpose: this is about reading a long thread, not writing one)."""
    import hashlib

    def row(sequence, **fields):
        content = f"message {sequence}: " + " ".join(f"word{i}" for i in range(12))
        return Message(tenant_id=thread.tenant_id, thread=thread, sequence=sequence, content=content,
                       content_sha256=hashlib.sha256(content.encode()).hexdigest(), **fields)

    questions = Message.objects.bulk_create([
        row(start + 2 * i, role="user", author_type="user", author_id=f"user:{author.pk}", author_user=author)
        for i in range(pairs)])
    Message.objects.bulk_create([
        row(q.sequence + 1, role="assistant", author_type="agent", author_id="agent:chat@1", in_reply_to=q)
        for q in questions])
    Thread.objects.filter(pk=thread.pk).update(last_sequence=start + 2 * pairs - 1)
    thread.refresh_from_db()


def test_a_thread_of_200_messages_reads_a_bounded_number_of_queries(client, analyst, supervisor, case, thread,
                                                                    django_assert_max_num_queries):
    bring_case_to(case, "decided", supervisor=supervisor, analyst=analyst)
    post_and_answer(thread, analyst, "please close the case")
    post_and_answer(thread, analyst, "Remember that I prefer short summaries.")
    answered_history(thread, pairs=98, author=analyst, start=5)
    services.message_redact(actor=analyst, message=Message.objects.get(thread=thread, sequence=199), reason="x")
    services.message_post(actor=analyst, thread=thread, content="One more question")  # a pending reply
    assert Message.objects.filter(thread=thread).count() == 201
    client.force_login(analyst)
    # session, user, thread, messages (+ redactions), the proposals, notices and memory the shown
    # answers made (when they made some), drift, actor labels, latest summary, pending replies (2),
    # the pending run, its queue position, the running count, tenant (page header) = at most 16
    with django_assert_max_num_queries(16):
        response = client.get(thread_url(thread))
    html = response.content.decode()
    assert response.status_code == 200 and len(response.context["messages_shown"]) == 100
    assert 'id="message-201"' in html and 'id="message-101"' not in html.replace('id="message-1011"', "")
    assert 'href="?before=102"' in html, html[html.index('id="conversation"'):][:600]
    assert "The assistant is replying to #201" in html
    with django_assert_max_num_queries(16):
        earlier = client.get(thread_url(thread) + "?before=102")
    shown = [m.sequence for m in earlier.context["messages_shown"]]
    assert shown == list(range(2, 102))
    with django_assert_max_num_queries(16):
        first = client.get(thread_url(thread) + "?before=2")
    assert [m.sequence for m in first.context["messages_shown"]] == [1]
