"""The nothing-changed check must itself be able to fail, or every denied-path test is hollow."""

import pytest
from django.core import mail
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from cases import services
from cases.models import Case
from tests.helpers import assert_nothing_changed


@pytest.mark.parametrize("change", ["transition", "case_row", "proposal", "email", "file", "task", "extra"])
def test_assert_nothing_changed_notices_each_kind_of_change(change, case, analyst, agent):
    counter = {"n": 0}
    with pytest.raises(AssertionError, match="a refused call changed something"):
        with assert_nothing_changed(case, extra={"counter": lambda: counter["n"]}):
            if change == "transition":
                services.case_transition(actor=analyst, case=case, transition="triage")
            elif change == "case_row":
                Case.objects.filter(pk=case.pk).update(risk_level="high")
            elif change == "proposal":
                services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "low"},
                                         rationale="r")
            elif change == "email":
                mail.send_mail("s", "b", "a@example.com", ["b@example.com"])
            elif change == "file":
                default_storage.save("evidence/orphan.txt", ContentFile(b"x"))
            elif change == "task":
                transaction.on_commit(lambda: None)  # how every task is queued
            else:
                counter["n"] += 1


def test_assert_nothing_changed_passes_when_nothing_changed(case):
    with assert_nothing_changed(case):
        Case.objects.get(pk=case.pk)
