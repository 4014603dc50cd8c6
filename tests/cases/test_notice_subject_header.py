"""A notice subject becomes an email header: one with a line break could never be sent and was
retried forever. It is refused when drafted and when edited, and nothing changes."""

import pytest

from cases import services
from cases.models import Notice
from core.errors import Invalid
from tests.helpers import assert_nothing_changed

pytestmark = pytest.mark.django_db

UNSAFE = ["Your complaint\r\nBcc: everyone@example.org", "Your\ncomplaint", "Your\rcomplaint",
          "Your complaint\u2028again", "Your\x00complaint", "Your\x0bcomplaint"]
MESSAGE = ["A subject must be one line: remove the line breaks and control characters."]


@pytest.mark.parametrize("subject", UNSAFE)
def test_a_subject_with_a_line_break_or_control_character_is_refused_at_draft(case, analyst, subject):
    with assert_nothing_changed(case, extra={"notices": Notice.objects.count}), pytest.raises(Invalid) as refused:
        services.notice_draft(actor=analyst, case=case, subject=subject, body="We are reviewing it.")
    assert refused.value.fields == {"subject": MESSAGE}


@pytest.mark.parametrize("subject", UNSAFE)
def test_a_subject_with_a_line_break_or_control_character_is_refused_at_edit(case, analyst, subject):
    notice = services.notice_draft(actor=analyst, case=case, subject="Your complaint", body="We are reviewing it.")
    before = Notice.objects.values().get(pk=notice.pk)
    with assert_nothing_changed(case), pytest.raises(Invalid) as refused:
        services.notice_edit(actor=analyst, notice=notice, subject=subject)
    assert refused.value.fields == {"subject": MESSAGE}
    assert Notice.objects.values().get(pk=notice.pk) == before


def test_a_one_line_subject_with_surrounding_whitespace_is_still_accepted(case, analyst):
    notice = services.notice_draft(actor=analyst, case=case, subject="  Your complaint\n", body="Reviewing it.")
    assert notice.subject == "Your complaint"
    edited = services.notice_edit(actor=analyst, notice=notice, subject="Your complaint: update\t")
    assert edited.subject == "Your complaint: update"
