"""The global search: a box in the top bar of every page, a results page of the tenant's cases by
reference, consumer, company or narrative words, in keyset pages, with a fixed number of queries."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import make_case

pytestmark = pytest.mark.django_db


def search(client, user, words, **extra):
    client.force_login(user)
    return client.get(reverse("web:search"), {"q": words, **extra})


def found(response) -> set[str]:
    return {case.reference for case in response.context["page"]}


@pytest.fixture
def cases(analyst):
    mortgage = make_case(actor=analyst, title="Escrow shortfall", company="Harbor Lending",
                         narrative="My escrow account was drained without notice.")
    card = make_case(actor=analyst, title="Card charged twice", company="Example Bank",
                     narrative="The merchant charged my card twice for one purchase.")
    card.complainant_name, card.complainant_email = "Dana Whitfield", "dana@example.org"
    card.save(update_fields=["complainant_name", "complainant_email"])
    return {"mortgage": mortgage, "card": card}


def test_the_search_box_is_in_the_top_bar_of_every_page(client, analyst, cases):
    client.force_login(analyst)
    for url in (reverse("web:case_list"), reverse("web:review_inbox"), reverse("web:thread_list"),
                reverse("web:case_detail", args=[cases["card"].reference])):
        html = client.get(url).content.decode()
        assert 'class="global-search"' in html and 'action="/search/"' in html and "data-global-search" in html


def test_finds_cases_by_reference_consumer_company_and_narrative_words(client, analyst, cases):
    card, mortgage = cases["card"].reference, cases["mortgage"].reference
    assert found(search(client, analyst, card)) == {card}
    assert found(search(client, analyst, "Whitfield")) == {card}  # the consumer's name
    assert found(search(client, analyst, "dana@example.org")) == {card}  # the consumer's email
    assert found(search(client, analyst, "Harbor")) == {mortgage}  # the company
    assert found(search(client, analyst, "escrow drained")) == {mortgage}  # the narrative's words
    assert found(search(client, analyst, "charged purchase")) == {card}
    response = search(client, analyst, "nothing matches this")
    assert found(response) == set() and "No case has all of these words" in response.content.decode()
    page = search(client, analyst, "Whitfield").content.decode()
    assert "Dana Whitfield" in page and f'href="/cases/{card}/"' in page


def test_only_the_tenants_cases(client, analyst, outsider, cases):
    theirs = make_case(actor=outsider, title="Escrow question", company="Harbor Lending", narrative="escrow")
    ours = {case.pk for case in search(client, analyst, "Harbor escrow").context["page"]}
    assert ours == {cases["mortgage"].pk}  # (references are per tenant: compared by id)
    assert {case.pk for case in search(client, outsider, "Harbor escrow").context["page"]} == {theirs.pk}


def test_pages_of_results_and_bad_input_is_a_400(client, analyst, cases, monkeypatch):
    monkeypatch.setattr("web.views.search.RESULTS_PER_PAGE", 1)
    first = search(client, analyst, "charged OR escrow")  # plain words: "OR" is a word here
    assert first.status_code == 200
    both = make_case(actor=analyst, title="Escrow charged twice", narrative="")
    response = search(client, analyst, "escrow")
    page = response.context["page"]
    assert len(page) == 1 and page.has_next
    nxt = search(client, analyst, "escrow", after=page.next_cursor)
    assert found(nxt) | found(response) == {both.reference, cases["mortgage"].reference}
    assert search(client, analyst, "escrow", after="garbage").status_code == 400
    assert search(client, analyst, "x" * 201).status_code == 400


def test_the_results_page_reads_a_fixed_number_of_queries(client, analyst, cases):
    client.force_login(analyst)
    counts = []
    for n in (0, 5):
        for i in range(n):
            make_case(actor=analyst, title=f"Escrow case {i}", narrative="")
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("web:search"), {"q": "escrow"}).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1] and counts[0] <= 8, counts
