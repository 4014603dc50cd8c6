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
    # of the second tuning set (analyst/data/signals/tuning2/): money owed back and not paid, asked in other words,
    # outranks the other requests of the narrative
    "It's been a month and the XXXX card company still hasn't refunded the original {$1900.00} purchase and they "
    "keep saying they are investigating. Please help me get this removed from my report and fixed.",
    "Monitored my account from online and the app and the funds WERE NOT returned. Please correct my account.",
    "I want my {$69.00} back. Please also remove the late fee from my account.",
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
    # of the second tuning set: a refund that was paid
    "In XXXX, I also cancelled the XXXX warranty of {$2800.00} and was refunded this amount by XXXX back to Santander.",
])
def test_a_refund_the_company_gave_or_started_is_not_money_back(text):
    assert request_kind(text) != "refund"
