"""Compact or comfortable lists: a person's choice, remembered on their account and applied as a
class on <body> of every page; a bad value changes nothing."""

import pytest
from django.urls import reverse

from accounts.models import User
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db


def body_class(client) -> str:
    html = client.get(reverse("web:case_list")).content.decode()
    return html[html.index("<body class=\"") + 13:].split('"', 1)[0]


def test_the_choice_is_remembered_per_person_and_shown_on_every_page(client, analyst, analyst_b):
    client.force_login(analyst)
    assert body_class(client) == "density-compact"  # the default: most rows on the screen
    response = client.post(reverse("web:density_set"), {"density": "comfortable", "next": "/review/"})
    assert response.status_code == 302 and response["Location"] == "/review/"
    assert User.objects.get(pk=analyst.pk).ui_density == "comfortable"
    assert body_class(client) == "density-comfortable"
    html = client.get(reverse("web:review_inbox")).content.decode()
    assert 'class="density-comfortable"' in html and 'aria-pressed="false"' in html
    client.force_login(analyst_b)
    assert body_class(client) == "density-compact"  # someone else's choice is their own
    client.force_login(analyst)
    client.post(reverse("web:density_set"), {"density": "compact", "next": "//elsewhere.example/"})
    assert body_class(client) == "density-compact"


def test_a_bad_value_changes_nothing(client, analyst):
    client.force_login(analyst)
    with assert_nothing_changed(extra={"densities": lambda: list(User.objects.values_list("ui_density", flat=True))}):
        response = client.post(reverse("web:density_set"), {"density": "tiny", "next": "/"}, follow=True)
    assert "Choose a compact or a comfortable view." in response.content.decode()
    assert client.get(reverse("web:density_set")).status_code == 405
