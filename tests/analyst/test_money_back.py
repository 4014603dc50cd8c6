"""MONEY-BACK is triage's reading of the consumer's request (analyst/triage.py, `consumer_request`):
a refund asked for or owed counts, a refund the company merely gave or started does not (RUBRIC.md)."""

from __future__ import annotations

import pytest

from analyst.context import evidence_of
from analyst.triage import consumer_request


def request_kind(text: str) -> str:
    return consumer_request(evidence_of({"evidence": [{"id": 1, "text": text}]}))["kind"]


@pytest.mark.parametrize("text", [
    # sentences of the tuning set (analyst/data/signals/tuning/) labelled MONEY-BACK
    "This process has been so long and complicated and all I want is for my money tp be refunded so that I can "
    "finally be done with naca for good.",
    "We want the bank to close the insurance portion of the escrow account, refund any escrow amount for insurance "
    "and stop charging form insurance amounts.",
    # of the old sample: a refund still awaited is owed, not given
    "I STILL HAVE NOT RECEIVED A REFUND from the US Treasury.",
])
def test_a_refund_asked_for_or_owed_is_money_back(text):
    assert request_kind(text) == "refund"


@pytest.mark.parametrize("text", [
    # sentences of the tuning set that mention a refund or compensation without asking money back
    "We met with the bank and thought we had the situation resolved as they provided a refund for the amount stolen.",
    "Along with getting a refund for money paid towards these loans the loans are to be deleted from my credit report.",
    "Called Amerihome, and was told that my Escrow Account would be updated to reflect the amount on the County Tax "
    "Statement, and that they were initiating an Over-payment refund request with XXXX County.",
    "The supervisor then again recommended that I adjust my insurance to compensate for the error, however, I see "
    "this as an inappropriate person directing what risks I should take.",
])
def test_a_refund_the_company_gave_or_started_is_not_money_back(text):
    assert request_kind(text) != "refund"
