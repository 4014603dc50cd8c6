"""A fixed CFPB export for the intake tests: good rows, a repeated complaint and malformed rows."""

from __future__ import annotations

import csv
import io

import pytest

from intake.cfpb import COLUMNS

NARRATIVE = "The servicer charged a late fee although my payment left my account on time."


def row(**values) -> list[str]:
    base = {"Date received": "2024-03-04", "Product": "Mortgage", "Sub-product": "Conventional home mortgage",
            "Issue": "Trouble during payment process", "Sub-issue": "", "Consumer complaint narrative": NARRATIVE,
            "Company public response": "", "Company": "Example Mortgage Co", "State": "CA", "ZIP code": "94110",
            "Tags": "Older American", "Submitted via": "Web", "Date sent to company": "2024-03-04",
            "Company response to consumer": "Closed with explanation", "Timely response?": "Yes",
            "Complaint ID": "1001"}
    base.update(values)
    return [base[column] for column in COLUMNS] + ["ignored"]


def csv_bytes(rows: list[list[str]], header: list[str] | None = None) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header or [*COLUMNS, "Internal note"])
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


FIXED_ROWS = [
    row(),                                                                       # row 1: good
    row(**{"Complaint ID": "1002", "Date received": "2024-03-05T10:00:00.000Z", "Tags": "None",
           "Consumer complaint narrative": "", "Issue": "", "Company": ""}),    # row 2: good, no narrative
    row(**{"Date received": "2024-03-09"}),                                      # row 3: 1001 again
    row(**{"Complaint ID": "1003", "Date received": "yesterday"}),              # row 4: bad date
    row(**{"Complaint ID": ""}),                                                 # row 5: no id
    row(**{"Complaint ID": "12AB"}),                                             # row 6: not a number
    row(**{"Complaint ID": "1004"})[:5],                                         # row 7: too few values
    row(**{"Complaint ID": "1005", "Product": "", "Issue": ""}),                # row 8: no title
]
EXPECTED_PROBLEMS = {
    4: "The date received 'yesterday' is not a date (expected YYYY-MM-DD).",
    5: "The Complaint ID is empty.",
    6: "The Complaint ID '12AB' is not a number.",
    7: "The row has 5 values but the header has 17 columns.",
    8: "The row has neither a Product nor an Issue, so the case would have no title.",
}


@pytest.fixture
def fixed_csv(tmp_path):
    path = tmp_path / "complaints.csv"
    path.write_bytes(csv_bytes(FIXED_ROWS))
    return path
